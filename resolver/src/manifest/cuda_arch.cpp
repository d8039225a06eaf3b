#include "manifest/cuda_arch.h"

#include "common/text.h"
#include "facts/cuda_facts.h"

namespace culina {

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
    const CudaFacts& facts = cuda_facts();
    const std::string prefix = "CUDA " + cuda.str() + " ";
    if (const auto oldest = facts.toolkit_oldest_arch.find(cuda.major);
        oldest != facts.toolkit_oldest_arch.end() && arch.cc < oldest->second) {
        return prefix + "targets sm_" + std::to_string(oldest->second.as_int()) + " and newer only";
    }
    CudaVersion first_cuda{1, 0};
    for (const auto& [major, first] : facts.major_introduced_in) {
        if (arch.cc.major >= major) first_cuda = first;
    }
    for (const auto& [cc, first] : facts.arch_introduced_in) {
        if (cc == arch.cc) first_cuda = first;
    }
    if (cuda < first_cuda) {
        return prefix + "cannot target " + arch.cc.str() + " (sm_" + std::to_string(arch.cc.as_int()) + "); that needs CUDA >= " +
               first_cuda.str();
    }
    const bool specific = arch.suffix == CudaArch::Suffix::arch_specific;
    if (specific || arch.suffix == CudaArch::Suffix::family) {
        const ArchSuffixFacts& suffix = specific ? facts.arch_specific : facts.family;
        if (arch.cc < suffix.oldest_arch || cuda < suffix.first_cuda) {
            return std::string(specific ? "arch-specific targets ('a')" : "family targets ('f')") + " exist for " +
                   suffix.oldest_arch.str() + " and newer with CUDA >= " + suffix.first_cuda.str() + " only";
        }
    }
    return std::nullopt;
}

}  // namespace culina
