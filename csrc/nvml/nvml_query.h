// What NVML says about the NVIDIA driver and the GPUs. NVML reads the kernel driver's state and
// creates no CUDA context, so asking it costs no GPU memory and leaves the process safe to fork:
// the import-time fit check uses it, never the CUDA runtime.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace culina::nvml {

struct NvmlGpu {
  // NVML's index, which is nvidia-smi's: PCI bus order over every GPU, whatever
  // CUDA_VISIBLE_DEVICES says.
  unsigned index = 0;
  std::string name;
  std::string uuid;  // "GPU-8932f937-...", the form CUDA_VISIBLE_DEVICES accepts
  // Compute capability; nullopt when NVML could not say (the first GPU call still checks).
  std::optional<std::pair<int, int>> capability;
};

struct NvmlReport {
  // The CUDA version the driver supports, 1000*major + 10*minor like cudaDriverGetVersion.
  int driver_cuda_version = 0;
  std::vector<NvmlGpu> gpus;
};

// nullopt when libnvidia-ml.so.1 is missing or NVML cannot start or name the driver's CUDA
// version (no driver loaded, a container without NVML).
std::optional<NvmlReport> query_nvml();

}  // namespace culina::nvml
