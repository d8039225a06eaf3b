/* A fake libcuda.so.1 for tests: the driver API entry points the probe uses, driven by
 * environment variables so each test picks a host:
 *   FAKE_CUDA_DRIVER_VERSION  cuDriverGetVersion's answer, e.g. 13000 (default) or 12080
 *   FAKE_CUDA_GPUS            "NVIDIA H200=9.0;NVIDIA A100-SXM4-80GB=8.0" (default: none)
 *   FAKE_CUDA_INIT_ERROR      cuInit's return code (default 0)
 *   FAKE_CUDA_MODE            "hang" (cuInit never returns), "stub" (CUDA_ERROR_STUB_LIBRARY),
 *                             "crash" (cuInit aborts)
 * Like the real driver it honours CUDA_VISIBLE_DEVICES, so a test can prove the probe unsets it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_GPUS 16

struct fake_gpu {
    char name[128];
    int major;
    int minor;
};

static struct fake_gpu gpus[MAX_GPUS];
static int gpu_count = 0;

static void load_gpus(void) {
    const char* spec = getenv("FAKE_CUDA_GPUS");
    char buffer[2048];
    gpu_count = 0;
    if (!spec || !*spec) return;
    snprintf(buffer, sizeof buffer, "%s", spec);
    for (char* item = strtok(buffer, ";"); item && gpu_count < MAX_GPUS; item = strtok(NULL, ";")) {
        char* eq = strrchr(item, '=');
        if (!eq) continue;
        *eq = '\0';
        snprintf(gpus[gpu_count].name, sizeof gpus[gpu_count].name, "%s", item);
        if (sscanf(eq + 1, "%d.%d", &gpus[gpu_count].major, &gpus[gpu_count].minor) == 2) gpu_count++;
    }
    const char* visible = getenv("CUDA_VISIBLE_DEVICES");
    if (visible) {
        int kept = 0;
        if (*visible) {
            int index = atoi(visible);
            if (index >= 0 && index < gpu_count) {
                gpus[0] = gpus[index];
                kept = 1;
            }
        }
        gpu_count = kept;
    }
}

static int mode_is(const char* mode) {
    const char* value = getenv("FAKE_CUDA_MODE");
    return value && strcmp(value, mode) == 0;
}

int cuDriverGetVersion(int* version) {
    const char* value = getenv("FAKE_CUDA_DRIVER_VERSION");
    *version = value ? atoi(value) : 13000;
    return 0;
}

int cuInit(unsigned flags) {
    (void)flags;
    if (mode_is("hang")) {
        for (;;) pause();
    }
    if (mode_is("crash")) abort();
    if (mode_is("stub")) return 34;
    const char* error = getenv("FAKE_CUDA_INIT_ERROR");
    if (error && atoi(error) != 0) return atoi(error);
    load_gpus();
    return gpu_count == 0 ? 100 : 0;
}

int cuDeviceGetCount(int* count) {
    *count = gpu_count;
    return 0;
}

int cuDeviceGet(int* device, int ordinal) {
    if (ordinal < 0 || ordinal >= gpu_count) return 101;
    *device = ordinal;
    return 0;
}

int cuDeviceGetName(char* name, int length, int device) {
    if (device < 0 || device >= gpu_count) return 101;
    snprintf(name, (size_t)length, "%s", gpus[device].name);
    return 0;
}

int cuDeviceGetAttribute(int* value, int attribute, int device) {
    if (device < 0 || device >= gpu_count) return 101;
    if (attribute == 75) *value = gpus[device].major;
    else if (attribute == 76) *value = gpus[device].minor;
    else return 1;
    return 0;
}

int cuGetErrorName(int error, const char** name) {
    switch (error) {
        case 34: *name = "CUDA_ERROR_STUB_LIBRARY"; return 0;
        case 100: *name = "CUDA_ERROR_NO_DEVICE"; return 0;
        case 999: *name = "CUDA_ERROR_UNKNOWN"; return 0;
        default: return 1;
    }
}
