// Which GPUs the code in a fat binary runs on (docs/ARCHITECTURE.md, the selection policy):
//   SASS sm_XZ covers X.Y when Z <= Y (same major); sm_XYa covers exactly X.Y;
//   sm_XYf covers X.Z for Z >= Y; PTX compute_P covers any GPU >= P when the driver can JIT it.
#pragma once

#include <string>
#include <vector>

#include "common/compute_capability.h"
#include "common/cuda_version.h"
#include "manifest/cuda_arch.h"
#include "manifest/manifest.h"

namespace culina {

// Whether code for `arch` may run on a GPU of compute capability `gpu`, driver aside.
bool arch_runs_on(const CudaArch& arch, const ComputeCapability& gpu);

// The GPU code of one CUDA wheel, as the manifest lists it.
struct WheelTargets {
    CudaVersion build;
    std::vector<CudaArch> sass;
    std::vector<CudaArch> ptx;

    // Requires a CUDA wheel (not the CPU-only variant); the manifest parser vetted the names.
    static WheelTargets of(const WheelEntry& wheel);
    // "sm_75,sm_80,sm_90 + compute_120"
    std::string str() const;
};

struct GpuCoverage {
    bool covered = false;
    // Covered: what runs ("sm_90 SASS"). Not covered: why not ("binary has sm_75,sm_80"), naming
    // targets and versions.
    std::string detail;
    bool via_ptx = false;
};

GpuCoverage cover_gpu(const WheelTargets& targets, const ComputeCapability& gpu, const CudaVersion& driver);

}  // namespace culina
