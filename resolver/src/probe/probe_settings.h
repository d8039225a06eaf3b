// What the user may set for the probe: overrides of the detected driver and GPUs, and the
// time limit for the libcuda query (parsed by settings/helper_settings.cpp).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/compute_capability.h"
#include "common/cuda_version.h"
#include "common/setting_names.h"

namespace culina {

struct ProbeSettings {
    // Outer optional: was the variable set. Inner: the value (nullopt = "no driver").
    std::optional<std::optional<CudaVersion>> override_cuda;
    std::optional<std::vector<ComputeCapability>> override_gpus;
    // PROBE_TIMEOUT: 0 until the settings table's default or value is parsed in (default_helper_settings).
    std::chrono::milliseconds cuda_timeout{0};
    // A CUDA toolkit from NVIDIA's PyPI packages that the installing Python has (--pypi-toolkit).
    std::optional<std::string> pypi_toolkit_root;
    SettingNames names;  // for messages naming OVERRIDE_CUDA, OVERRIDE_SM, PROBE_TIMEOUT
};

}  // namespace culina
