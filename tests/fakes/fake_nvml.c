/* A fake libnvidia-ml.so.1 for tests: the NVML calls culina's import-time fit check makes,
 * describing the same host as the fake libcuda (fake_gpus.h: FAKE_CUDA_GPUS,
 * FAKE_CUDA_DRIVER_VERSION). Like the real NVML it lists every GPU, ignoring
 * CUDA_VISIBLE_DEVICES, and gives GPU i the UUID "GPU-fa4e0000-0000-0000-0000-00000000000i".
 *   FAKE_NVML_INIT_ERROR  nvmlInit_v2's return code (default 0; 9 is NVML_ERROR_DRIVER_NOT_LOADED)
 */
#include <stdint.h>

#include "fake_gpus.h"

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_INSUFFICIENT_SIZE 7

static struct fake_gpu gpus[MAX_GPUS];
static int gpu_count = 0;
static int initialised = 0;

/* A device handle is the GPU's index plus one, so that no handle is NULL. */
static int gpu_of(void* device) {
    const intptr_t index = (intptr_t)device - 1;
    return initialised && index >= 0 && index < gpu_count ? (int)index : -1;
}

int nvmlInit_v2(void) {
    const char* error = getenv("FAKE_NVML_INIT_ERROR");
    if (error && atoi(error) != 0) return atoi(error);
    gpu_count = parse_fake_gpus(gpus);
    initialised = 1;
    return NVML_SUCCESS;
}

int nvmlShutdown(void) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    initialised = 0;
    return NVML_SUCCESS;
}

int nvmlSystemGetCudaDriverVersion_v2(int* version) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    *version = fake_driver_cuda_version();
    return NVML_SUCCESS;
}

int nvmlDeviceGetCount_v2(unsigned* count) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    *count = (unsigned)gpu_count;
    return NVML_SUCCESS;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (index >= (unsigned)gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
    *device = (void*)(intptr_t)(index + 1);
    return NVML_SUCCESS;
}

int nvmlDeviceGetCudaComputeCapability(void* device, int* major, int* minor) {
    const int gpu = gpu_of(device);
    if (gpu < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *major = gpus[gpu].major;
    *minor = gpus[gpu].minor;
    return NVML_SUCCESS;
}

static int copy_text(const char* text, char* buffer, unsigned length) {
    if ((size_t)snprintf(buffer, length, "%s", text) >= length) return NVML_ERROR_INSUFFICIENT_SIZE;
    return NVML_SUCCESS;
}

int nvmlDeviceGetName(void* device, char* name, unsigned length) {
    const int gpu = gpu_of(device);
    return gpu < 0 ? NVML_ERROR_INVALID_ARGUMENT : copy_text(gpus[gpu].name, name, length);
}

int nvmlDeviceGetUUID(void* device, char* uuid, unsigned length) {
    char text[64];
    const int gpu = gpu_of(device);
    if (gpu < 0) return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(text, sizeof text, "GPU-fa4e0000-0000-0000-0000-%012d", gpu);
    return copy_text(text, uuid, length);
}
