#include "manifest/cuda_arch.h"

#include "common/text.h"

namespace culina {
namespace {

// First CUDA release able to compile for a compute capability newer than the generic floors.
struct ArchIntroduction {
    ComputeCapability cc;
    CudaVersion first_cuda;
};

const ArchIntroduction kArchIntroductions[] = {
    {{8, 6}, {11, 1}},  {{8, 7}, {11, 4}},  {{8, 9}, {11, 8}},  {{9, 0}, {11, 8}},  {{10, 0}, {12, 8}},
    {{10, 1}, {12, 8}}, {{10, 3}, {12, 9}}, {{11, 0}, {13, 0}}, {{12, 0}, {12, 8}}, {{12, 1}, {12, 9}},
};

// Blackwell and later (major >= 10) need at least CUDA 12.8 even when not listed above.
constexpr CudaVersion kFirstCudaForMajor10{12, 8};

}  // namespace

std::string CudaArch::compact() const {
    std::string text = std::to_string(cc.as_int());
    if (suffix == Suffix::arch_specific) text += 'a';
    if (suffix == Suffix::family) text += 'f';
    return text;
}

std::string CudaArch::str() const { return (kind == Kind::sass ? "sm_" : "compute_") + compact(); }

std::optional<CudaArch> parse_cuda_arch(const std::string& text) {
    CudaArch arch;
    std::string rest;
    if (starts_with(text, "sm_")) {
        arch.kind = CudaArch::Kind::sass;
        rest = text.substr(3);
    } else if (starts_with(text, "compute_")) {
        arch.kind = CudaArch::Kind::ptx;
        rest = text.substr(8);
    } else {
        return std::nullopt;
    }
    if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
        arch.suffix = rest.back() == 'a' ? CudaArch::Suffix::arch_specific : CudaArch::Suffix::family;
        rest.pop_back();
    }
    // Only the compact digit form ("90", "120"); parse_compute_capability would also take "9.0".
    if (rest.size() < 2 || rest.size() > 3 || !parse_small_uint(rest)) return std::nullopt;
    const std::optional<ComputeCapability> cc = parse_compute_capability(rest);
    if (!cc) return std::nullopt;
    arch.cc = *cc;
    return arch;
}

std::optional<std::string> toolkit_arch_problem(const CudaVersion& cuda, const CudaArch& arch) {
    const std::string prefix = "CUDA " + cuda.str() + " ";
    if (cuda.major >= 13 && arch.cc < ComputeCapability{7, 5}) return prefix + "targets sm_75 and newer only";
    if (cuda.major == 12 && arch.cc < ComputeCapability{5, 0}) return prefix + "targets sm_50 and newer only";
    CudaVersion first_cuda{1, 0};
    if (arch.cc.major >= 10) first_cuda = kFirstCudaForMajor10;
    for (const ArchIntroduction& introduction : kArchIntroductions) {
        if (introduction.cc == arch.cc) first_cuda = introduction.first_cuda;
    }
    if (cuda < first_cuda) {
        return prefix + "cannot target " + arch.cc.str() + " (sm_" + std::to_string(arch.cc.as_int()) + "); that needs CUDA >= " +
               first_cuda.str();
    }
    if (arch.suffix == CudaArch::Suffix::arch_specific && (arch.cc < ComputeCapability{9, 0} || cuda.major < 12)) {
        return "arch-specific targets ('a') exist for 9.0 and newer with CUDA >= 12.0 only";
    }
    if (arch.suffix == CudaArch::Suffix::family && (arch.cc.major < 10 || cuda < CudaVersion{12, 9})) {
        return "family targets ('f') exist for 10.0 and newer with CUDA >= 12.9 only";
    }
    return std::nullopt;
}

}  // namespace culina
