// A compile target found in a fat binary: SASS ("sm_90", "sm_90a", "sm_120f") or PTX
// ("compute_120"). The suffix decides which GPUs the code may run on (see policy/arch_coverage.h).
#pragma once

#include <optional>
#include <string>

#include "common/compute_capability.h"
#include "common/cuda_version.h"

namespace culina {

struct CudaArch {
    enum class Kind { sass, ptx };
    enum class Suffix {
        none,           // sm_80: runs on 8.0 and later minors of major 8
        arch_specific,  // sm_90a: runs on 9.0 only
        family,         // sm_120f: runs on 12.0 and later minors of major 12
    };

    Kind kind = Kind::sass;
    ComputeCapability cc;
    Suffix suffix = Suffix::none;

    // "sm_90a", "compute_120"
    std::string str() const;
    // The digits and suffix without the prefix: "90a", "120".
    std::string compact() const;
};

// "sm_90", "sm_90a", "sm_120f", "compute_120" -> CudaArch; nullopt for anything else.
std::optional<CudaArch> parse_cuda_arch(const std::string& text);

// Why a CUDA toolkit of version `cuda` cannot emit code for `arch` ("CUDA 13.0 targets sm_75 and
// newer only"), or nullopt when it can. Used both to check a manifest's claims and to decide
// whether a local toolkit can build for a GPU.
std::optional<std::string> toolkit_arch_problem(const CudaVersion& cuda, const CudaArch& arch);

}  // namespace culina
