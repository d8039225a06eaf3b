#include "nvml/nvml_query.h"

#include <dlfcn.h>

namespace culina::nvml {
namespace {

// Values and signatures from nvml.h, stable across drivers; the header is not needed to build.
constexpr int kNvmlSuccess = 0;
constexpr unsigned kTextBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE and NVML_DEVICE_UUID_V2_BUFFER_SIZE

using NvmlDevice = void*;
using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlSystemGetCudaDriverVersion = int (*)(int*);
using NvmlDeviceGetCount = int (*)(unsigned*);
using NvmlDeviceGetHandleByIndex = int (*)(unsigned, NvmlDevice*);
using NvmlDeviceGetCudaComputeCapability = int (*)(NvmlDevice, int*, int*);
using NvmlDeviceGetText = int (*)(NvmlDevice, char*, unsigned);

template <typename Function>
Function entry_point(void* lib, const char* name) {
  return reinterpret_cast<Function>(dlsym(lib, name));
}

}  // namespace

std::optional<NvmlReport> query_nvml() {
  // Stays loaded: NVML may leave exit handlers behind, and unloading it under them is unsafe.
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::nullopt;
  auto init = entry_point<NvmlInit>(lib, "nvmlInit_v2");
  auto shutdown = entry_point<NvmlShutdown>(lib, "nvmlShutdown");
  auto get_cuda_version = entry_point<NvmlSystemGetCudaDriverVersion>(lib, "nvmlSystemGetCudaDriverVersion_v2");
  auto get_count = entry_point<NvmlDeviceGetCount>(lib, "nvmlDeviceGetCount_v2");
  auto get_handle = entry_point<NvmlDeviceGetHandleByIndex>(lib, "nvmlDeviceGetHandleByIndex_v2");
  auto get_capability = entry_point<NvmlDeviceGetCudaComputeCapability>(lib, "nvmlDeviceGetCudaComputeCapability");
  auto get_name = entry_point<NvmlDeviceGetText>(lib, "nvmlDeviceGetName");
  auto get_uuid = entry_point<NvmlDeviceGetText>(lib, "nvmlDeviceGetUUID");
  if (!init || !shutdown || !get_cuda_version || !get_count || !get_handle || !get_capability || !get_name ||
      !get_uuid)
    return std::nullopt;
  if (init() != kNvmlSuccess) return std::nullopt;

  std::optional<NvmlReport> report;
  int cuda_version = 0;
  unsigned count = 0;
  if (get_cuda_version(&cuda_version) == kNvmlSuccess && cuda_version > 0 && get_count(&count) == kNvmlSuccess) {
    report.emplace();
    report->driver_cuda_version = cuda_version;
    for (unsigned i = 0; i < count; ++i) {
      NvmlGpu gpu;
      gpu.index = i;
      NvmlDevice device = nullptr;
      if (get_handle(i, &device) == kNvmlSuccess) {
        char text[kTextBufferSize] = {0};
        if (get_name(device, text, kTextBufferSize) == kNvmlSuccess) gpu.name = text;
        if (get_uuid(device, text, kTextBufferSize) == kNvmlSuccess) gpu.uuid = text;
        int major = 0, minor = 0;
        if (get_capability(device, &major, &minor) == kNvmlSuccess) gpu.capability = {major, minor};
      }
      report->gpus.push_back(gpu);
    }
  }
  shutdown();
  return report;
}

}  // namespace culina::nvml
