/* A fake libcuda.so.1 for tests: the driver API entry points the probe uses, driven by
 * environment variables so each test picks a host:
 *   FAKE_CUDA_DRIVER_VERSION  cuDriverGetVersion's answer, e.g. 13000 (default) or 12080
 *   FAKE_CUDA_GPUS            "NVIDIA H200=9.0;NVIDIA A100-SXM4-80GB=8.0" (default: none)
 *   FAKE_CUDA_INIT_ERROR      cuInit's return code (default 0)
 *   FAKE_CUDA_MODE            "hang" (cuInit never returns), "stub" (CUDA_ERROR_STUB_LIBRARY),
 *                             "crash" (cuInit aborts), "fork" (cuInit starts a process that
 *                             sleeps FAKE_CUDA_FORK_SECONDS, 30 by default, holding every descriptor
 *                             it inherited, then returns as usual), "setsid" (as "fork", but the
 *                             process leaves the probe's process group and session with setsid()
 *                             before cuInit returns, as some drivers' helper daemons do),
 *                             "hostile_name" (every GPU is named kHostileName: invalid UTF-8, a
 *                             newline that would forge a line, a terminal escape)
 *   FAKE_CUDA_PID_FILE        "fork"/"setsid": the forked process's pid is written here before
 *                             cuInit returns, so a test can check that it is gone
 *   FAKE_CUDA_DEVICE_COUNT    cuDeviceGetCount's answer instead of the GPUs' number (e.g.
 *                             2000000000); every device then reads as FAKE_CUDA_GPUS' first GPU
 *   FAKE_CUDA_CALL_LOG        a file to which cuInit and cuGetProcAddress append a line each, so a
 *                             test can tell whether anything began to initialise CUDA (no context
 *                             can exist without cuInit)
 * Like the real driver it honours CUDA_VISIBLE_DEVICES, so a test can prove the probe unsets it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "fake_gpus.h"

static struct fake_gpu gpus[MAX_GPUS];
static int gpu_count = 0;

static void load_gpus(void) {
    gpu_count = parse_fake_gpus(gpus);
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

static void log_call(const char* call, const char* detail) {
    const char* path = getenv("FAKE_CUDA_CALL_LOG");
    if (!path || !*path) return;
    FILE* log = fopen(path, "a");
    if (!log) return;
    fprintf(log, detail ? "%s %s\n" : "%s\n", call, detail);
    fclose(log);
}

int cuDriverGetVersion(int* version) {
    *version = fake_driver_cuda_version();
    return 0;
}

/* "\xff" and "\xc3(" are not UTF-8; after the newline comes what a line-based reader would take
 * for a GPU of its own (sm 12.0); ESC [2J clears a terminal. */
static const char kHostileName[] = "Evil\xff\xc3(GPU\ngpu 7 12 0 forged\x1b[2J\t\x7f end";

/* Starts the long-lived process of the "fork" and "setsid" modes. It holds every descriptor it
 * inherited; cuInit returns only once it has left the session (a pipe closes when it has), so
 * that a probe cannot kill it with its process group by luck of timing. */
static void start_lingering_process(int own_session) {
    int ready[2];
    if (pipe(ready) != 0) return;
    const pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        if (own_session) setsid();
        close(ready[1]);
        const char* seconds = getenv("FAKE_CUDA_FORK_SECONDS");
        sleep(seconds ? (unsigned)atoi(seconds) : 30u);
        _exit(0);
    }
    close(ready[1]);
    char byte;
    while (pid > 0 && read(ready[0], &byte, 1) > 0) {
    }
    close(ready[0]);
    const char* pid_file = getenv("FAKE_CUDA_PID_FILE");
    FILE* out = pid_file && *pid_file && pid > 0 ? fopen(pid_file, "w") : NULL;
    if (out) {
        fprintf(out, "%d\n", (int)pid);
        fclose(out);
    }
}

int cuInit(unsigned flags) {
    (void)flags;
    log_call("cuInit", NULL);
    if (mode_is("fork") || mode_is("setsid")) start_lingering_process(mode_is("setsid"));
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

static int claimed_count(void) {
    const char* value = getenv("FAKE_CUDA_DEVICE_COUNT");
    return value ? atoi(value) : -1;
}

/* A claimed count beyond the listed GPUs maps every ordinal to the first one. */
static int listed_device(int device) {
    return claimed_count() >= 0 && gpu_count > 0 ? 0 : device;
}

int cuDeviceGetCount(int* count) {
    *count = claimed_count() >= 0 ? claimed_count() : gpu_count;
    return 0;
}

int cuDeviceGet(int* device, int ordinal) {
    if (claimed_count() >= 0 && ordinal >= 0 && ordinal < claimed_count()) {
        *device = ordinal;
        return 0;
    }
    if (ordinal < 0 || ordinal >= gpu_count) return 101;
    *device = ordinal;
    return 0;
}

int cuDeviceGetName(char* name, int length, int device) {
    device = listed_device(device);
    if (device < 0 || device >= gpu_count) return 101;
    snprintf(name, (size_t)length, "%s", mode_is("hostile_name") ? kHostileName : gpus[device].name);
    return 0;
}

int cuDeviceGetAttribute(int* value, int attribute, int device) {
    device = listed_device(device);
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

/* What CUDA's runtime (cudart, linked statically into culina._C) does first when it initialises:
 * it looks every driver entry point up through cuGetProcAddress, then calls cuInit. The fake
 * hands out its own functions and, for every other name, one that answers
 * CUDA_ERROR_NOT_SUPPORTED, so a real cudart gets as far as cuInit (it stops after, at the
 * driver's private export tables). */
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NOT_SUPPORTED 801
#define CUDA_VERSION_OF_GET_PROC_ADDRESS_V2 12000

static int not_supported(void) { return CUDA_ERROR_NOT_SUPPORTED; }

int cuGetProcAddress(const char* symbol, void** function, int cuda_version, unsigned long long flags);
int cuGetProcAddress_v2(const char* symbol, void** function, int cuda_version, unsigned long long flags,
                        int* symbol_status);

static void* entry_point(const char* symbol, int cuda_version) {
    static const struct {
        const char* name;
        void* function;
    } own[] = {
        {"cuInit", (void*)cuInit},
        {"cuDriverGetVersion", (void*)cuDriverGetVersion},
        {"cuDeviceGetCount", (void*)cuDeviceGetCount},
        {"cuDeviceGet", (void*)cuDeviceGet},
        {"cuDeviceGetName", (void*)cuDeviceGetName},
        {"cuDeviceGetAttribute", (void*)cuDeviceGetAttribute},
        {"cuGetErrorName", (void*)cuGetErrorName},
    };
    if (strcmp(symbol, "cuGetProcAddress") == 0)
        return cuda_version >= CUDA_VERSION_OF_GET_PROC_ADDRESS_V2 ? (void*)cuGetProcAddress_v2 : (void*)cuGetProcAddress;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; ++i) {
        if (strcmp(own[i].name, symbol) == 0) return own[i].function;
    }
    return (void*)not_supported;
}

int cuGetProcAddress(const char* symbol, void** function, int cuda_version, unsigned long long flags) {
    (void)flags;
    if (!symbol || !function) return CUDA_ERROR_INVALID_VALUE;
    log_call("cuGetProcAddress", symbol);
    *function = entry_point(symbol, cuda_version);
    return 0;
}

/* symbol_status is a CUdriverProcAddressQueryResult: 0 means found. */
int cuGetProcAddress_v2(const char* symbol, void** function, int cuda_version, unsigned long long flags,
                        int* symbol_status) {
    const int result = cuGetProcAddress(symbol, function, cuda_version, flags);
    if (symbol_status) *symbol_status = 0;
    return result;
}
