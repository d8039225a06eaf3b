// CPU facts: architecture, vendor, model, ISA level and features.
// cpuinfo answers when it was found at build time; /proc/cpuinfo otherwise.
#pragma once

#include <string>
#include <vector>

#include "host/host_info.h"

namespace culina {

// /proc/cpuinfo text for a machine of this arch -> vendor, model, features (canonical names).
CpuInfo parse_proc_cpuinfo(const std::string& text, const std::string& arch);
// "x86-64", "x86-64-v2", "x86-64-v3" or "x86-64-v4" from canonical feature names.
std::string x86_isa_level(const std::vector<std::string>& features);
// "armv8-a", "armv8.2-a" or "armv9-a" from /proc/cpuinfo feature names.
std::string arm_isa_level(const std::vector<std::string>& features);

CpuInfo probe_cpu();

}  // namespace culina
