/* The fake host's GPUs, shared by the fake libcuda and the fake NVML so that both describe one
 * machine: FAKE_CUDA_GPUS lists them as "NVIDIA H200=9.0;NVIDIA A100-SXM4-80GB=8.0". */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GPUS 16

struct fake_gpu {
    char name[128];
    int major;
    int minor;
};

/* Fills `gpus` from FAKE_CUDA_GPUS and returns how many there are. */
static int parse_fake_gpus(struct fake_gpu* gpus) {
    const char* spec = getenv("FAKE_CUDA_GPUS");
    char buffer[2048];
    int count = 0;
    if (!spec || !*spec) return 0;
    snprintf(buffer, sizeof buffer, "%s", spec);
    for (char* item = strtok(buffer, ";"); item && count < MAX_GPUS; item = strtok(NULL, ";")) {
        char* eq = strrchr(item, '=');
        if (!eq) continue;
        *eq = '\0';
        snprintf(gpus[count].name, sizeof gpus[count].name, "%s", item);
        if (sscanf(eq + 1, "%d.%d", &gpus[count].major, &gpus[count].minor) == 2) count++;
    }
    return count;
}

/* FAKE_CUDA_DRIVER_VERSION: the CUDA version the driver supports, 13000 by default. */
static int fake_driver_cuda_version(void) {
    const char* value = getenv("FAKE_CUDA_DRIVER_VERSION");
    return value ? atoi(value) : 13000;
}
