// The CUDA toolkit a local build would use: nvcc and its version.
#pragma once

#include <optional>
#include <string>

#include "common/cuda_version.h"
#include "host/host_info.h"

namespace culina {

// "Cuda compilation tools, release 13.0, V13.0.88" -> 13.0.
std::optional<CudaVersion> parse_nvcc_version(const std::string& text);

// Ordered sources: nvcc on PATH, $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin.
// A candidate that exists but cannot report its version is recorded in errors.
std::optional<ToolkitInfo> probe_toolkit(std::vector<std::string>& errors);

}  // namespace culina
