// AMD GPUs, from the KFD topology the amdgpu driver publishes in sysfs. culina has no ROCm build:
// the probe reports them so that the decision can say why such a host gets the CPU build.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "host/host_info.h"

namespace culina {

// Where the amdgpu driver lists its topology nodes: one folder per CPU or GPU, each with a
// `properties` file.
inline constexpr const char* kKfdTopologyNodes = "/sys/class/kfd/kfd/topology/nodes";

// One node's `properties` text ("name value" lines): the GPU it describes, or nullopt for a CPU
// node (simd_count 0) and for text without a usable simd_count or gfx_target_version.
std::optional<AmdGpuInfo> parse_kfd_node_properties(const std::string& text, int node);

// gfx_target_version's number as the ISA name: 90402 -> "gfx942", 90010 -> "gfx90a", 110000 -> "gfx1100".
std::string gfx_target_name(unsigned version);

// Every GPU node under `nodes_dir`, in node order; nothing when the folder is absent (no amdgpu driver).
std::vector<AmdGpuInfo> probe_amd_gpus(const std::string& nodes_dir = kKfdTopologyNodes);

}  // namespace culina
