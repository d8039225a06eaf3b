// What the user may set for the probe: overrides of the detected driver and GPUs, and the
// time limit for the libcuda query. Malformed values throw SettingError.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/compute_capability.h"
#include "common/cuda_version.h"

namespace culina {

struct ProbeSettings {
    // Outer optional: was the variable set. Inner: the value (nullopt = "no driver").
    std::optional<std::optional<CudaVersion>> override_cuda;
    std::optional<std::vector<ComputeCapability>> override_gpus;
    std::chrono::milliseconds cuda_timeout{15000};
    // A CUDA toolkit from NVIDIA's PyPI packages that the installing Python has (--pypi-toolkit).
    std::optional<std::string> pypi_toolkit_root;
};

// CULINA_OVERRIDE_CUDA: "12.9" or "13"; "" means no driver.
std::optional<CudaVersion> parse_override_cuda(const std::string& value);
// CULINA_OVERRIDE_SM: "8.6,9.0" or "86;90"; "" means no GPU.
std::vector<ComputeCapability> parse_override_sm(const std::string& value);
// CULINA_PROBE_TIMEOUT: seconds, e.g. "15" or "0.5".
std::chrono::milliseconds parse_probe_timeout(const std::string& value);

ProbeSettings probe_settings_from_env();

}  // namespace culina
