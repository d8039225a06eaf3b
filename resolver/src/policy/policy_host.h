// What the selection policy sees of the host: which kind of host it is (the no-GPU rules differ
// by what else is present), its GPUs grouped by compute capability, and the texts its reasons use.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "manifest/cuda_arch.h"
#include "policy/select_wheel.h"

namespace culina {

enum class HostKind {
    with_gpus,    // at least one GPU visible
    build_host,   // no GPU, a CUDA toolkit: assumed to build for GPUs elsewhere (a container build)
    driver_only,  // no GPU, no toolkit, a driver: GPUs are assumed to appear at run time
    cpu_only,     // no GPU, no driver, no toolkit
};

// GPUs of one compute capability; a host of eight H200s is one group.
struct GpuGroup {
    ComputeCapability cc;
    std::vector<int> indexes;

    // "GPU 0 (9.0)", "GPUs 0,1 (9.0)"
    std::string label() const;
};

struct PolicyHost {
    explicit PolicyHost(const SelectionInput& input);

    const SelectionInput& input;
    HostKind kind = HostKind::cpu_only;
    std::vector<GpuGroup> gpus;

    std::string gpu_list() const;     // "GPU 0 (9.0), GPUs 1,2 (8.6)"
    std::string driver_text() const;  // "CUDA 13.0" or "no driver"
    // "AMD GPU node 1 (gfx942)", "AMD GPU nodes 1,2 (gfx942)"; "" when the probe found none.
    std::string amd_gpu_list() const;
    // What a CPU-only decision adds for a host with AMD GPUs: "" without them.
    std::string no_rocm_note() const;
    std::string release_text() const;  // "culina 0.1.0"
    // "<PREFIX>VARIANT" for "VARIANT": the variable the user sets.
    std::string variable(const char* suffix) const;
    // Why this host's driver cannot run SASS built with CUDA `build`, or nullopt.
    std::optional<std::string> driver_problem(const CudaVersion& build) const;
};

// SASS for exactly `cc` ("sm_90").
CudaArch sass_for(const ComputeCapability& cc);

}  // namespace culina
