// What the probe learned about this machine. Policy reads it; nothing here detects anything.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/compute_capability.h"
#include "common/cuda_version.h"

namespace culina {

struct LibcInfo {
    std::string name;     // "glibc", "musl", or "" when unknown
    std::string version;  // "2.36", or "" when unknown
};

struct OsInfo {
    std::string system;   // uname sysname, e.g. "Linux"
    std::string release;  // kernel release
    LibcInfo libc;
    bool wsl = false;
    bool container = false;
};

struct CpuInfo {
    std::string arch;       // "x86_64", "aarch64"
    std::string vendor;
    std::string model;
    std::string isa_level;  // "x86-64-v3", "armv8.2-a", or "" when unknown
    std::vector<std::string> features;
    std::string source;     // "cpuinfo" or "/proc/cpuinfo"
};

struct DriverInfo {
    std::optional<std::string> version;  // "580.159.04"
    std::optional<CudaVersion> cuda;     // highest CUDA version the driver supports
    std::string source;                  // where the facts came from, for the log
};

struct GpuInfo {
    int index = 0;
    std::string name;
    ComputeCapability sm;
};

// An AMD GPU from the KFD topology: culina has no ROCm build, so it is reported, never served.
struct AmdGpuInfo {
    int node = 0;     // its topology node
    std::string gfx;  // the ISA, "gfx942"
};

struct ToolkitInfo {
    std::string nvcc;  // absolute path
    CudaVersion cuda;
    // Where the probe found it (CUDA_HOME, CUDA_PATH, PATH, the PyPI toolkit, /usr/local/cuda),
    // for the build record: the build compiles with this nvcc and searches no further.
    std::string found_in;
};

struct HostInfo {
    OsInfo os;
    CpuInfo cpu;
    DriverInfo driver;
    std::vector<GpuInfo> gpus;          // NVIDIA GPUs
    std::vector<AmdGpuInfo> amd_gpus;
    std::optional<ToolkitInfo> toolkit;
    std::vector<std::string> overrides;  // names of the <PREFIX>OVERRIDE_* variables that applied
    std::vector<std::string> errors;     // what could not be detected, and why
};

}  // namespace culina
