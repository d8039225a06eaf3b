// The CUDA toolkit a local build would use: nvcc and its version.
#pragma once

#include <optional>
#include <string>

#include "common/cuda_version.h"
#include "host/host_info.h"

namespace culina {

// "Cuda compilation tools, release 13.0, V13.0.88" -> 13.0.
std::optional<CudaVersion> parse_nvcc_version(const std::string& text);

// Ordered sources: $CUDA_HOME/bin, $CUDA_PATH/bin, nvcc on PATH, the PyPI toolkit the installing
// Python has (`pypi_root`, nvidia/cu13 in its site-packages), /usr/local/cuda/bin.
// A candidate that exists but cannot report its version is recorded in errors.
std::optional<ToolkitInfo> probe_toolkit(const std::optional<std::string>& pypi_root, std::vector<std::string>& errors);

}  // namespace culina
