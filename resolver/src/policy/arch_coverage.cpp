#include "policy/arch_coverage.h"

#include "policy/driver_compat.h"

namespace culina {
namespace {

// Of the targets that run on `gpu`, the highest: the one the CUDA loader would pick.
const CudaArch* best_target_for(const std::vector<CudaArch>& archs, const ComputeCapability& gpu) {
    const CudaArch* best = nullptr;
    for (const CudaArch& arch : archs) {
        if (arch_runs_on(arch, gpu) && (best == nullptr || best->cc < arch.cc)) best = &arch;
    }
    return best;
}

std::string join_names(const std::vector<CudaArch>& archs) {
    std::string text;
    for (const CudaArch& arch : archs) text += (text.empty() ? "" : ",") + arch.str();
    return text;
}

}  // namespace

bool arch_runs_on(const CudaArch& arch, const ComputeCapability& gpu) {
    switch (arch.suffix) {
        case CudaArch::Suffix::arch_specific:
            return gpu == arch.cc;
        case CudaArch::Suffix::family:
            return gpu.major == arch.cc.major && gpu.minor >= arch.cc.minor;
        case CudaArch::Suffix::none:
            if (arch.kind == CudaArch::Kind::ptx) return !(gpu < arch.cc);
            return gpu.major == arch.cc.major && gpu.minor >= arch.cc.minor;
    }
    return false;
}

WheelTargets WheelTargets::of(const WheelEntry& wheel) {
    WheelTargets targets;
    targets.build = wheel.cuda.value();
    for (const std::string& name : wheel.sass) targets.sass.push_back(parse_cuda_arch(name).value());
    for (const std::string& name : wheel.ptx) targets.ptx.push_back(parse_cuda_arch(name).value());
    return targets;
}

std::string WheelTargets::str() const {
    std::string text = sass.empty() ? "no SASS" : join_names(sass);
    if (!ptx.empty()) text += " + " + join_names(ptx);
    return text;
}

GpuCoverage cover_gpu(const WheelTargets& targets, const ComputeCapability& gpu, const CudaVersion& driver) {
    const CudaArch* sass = best_target_for(targets.sass, gpu);
    const CudaArch* ptx = best_target_for(targets.ptx, gpu);
    if (sass != nullptr && driver_runs_sass_of(driver, targets.build)) return {true, sass->str() + " SASS", false};
    if (ptx != nullptr && driver_jits_ptx_of(driver, targets.build)) {
        return {true, ptx->str() + " PTX, JIT-compiled by the driver at first use", true};
    }
    if (sass != nullptr) {
        return {false, sass->str() + " needs " + describe_driver_needed_for(targets.build) + "; this driver supports CUDA " + driver.str(),
                false};
    }
    if (ptx != nullptr) {
        return {false,
                "only " + ptx->str() + " PTX fits, and a driver supporting CUDA " + driver.str() +
                    " cannot JIT PTX from CUDA " + targets.build.str(),
                false};
    }
    return {false, "binary has " + targets.str(), false};
}

}  // namespace culina
