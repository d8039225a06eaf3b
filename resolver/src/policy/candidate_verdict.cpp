#include "policy/candidate_verdict.h"

#include "common/text.h"
#include "policy/arch_coverage.h"

namespace culina {
namespace {

Verdict judge_for_gpus(const PolicyHost& host, const WheelEntry& wheel) {
    if (wheel.cpu_only()) {
        return {false, false,
                "CPU-only variant; this host has " + host.gpu_list() + ", which a CUDA wheel or a local CUDA build must serve"};
    }
    const std::optional<CudaVersion>& driver = host.input.host.driver.cuda;
    if (!driver) return {false, false, "no NVIDIA driver CUDA version was found, so no CUDA wheel can be loaded"};
    if (const std::optional<std::string> problem = host.driver_problem(*wheel.cuda)) return {false, false, *problem};
    const WheelTargets targets = WheelTargets::of(wheel);
    std::vector<std::string> covered;
    std::vector<std::string> uncovered;
    bool via_ptx = false;
    for (const GpuGroup& group : host.gpus) {
        const GpuCoverage coverage = cover_gpu(targets, group.cc, *driver);
        if (coverage.covered) {
            covered.push_back(group.label() + " via " + coverage.detail);
            via_ptx = via_ptx || coverage.via_ptx;
        } else {
            uncovered.push_back(group.label() + " not covered: " + coverage.detail);
        }
    }
    if (!uncovered.empty()) return {false, false, join(uncovered, "; ")};
    return {true, via_ptx, "runs here: " + join(covered, "; ")};
}

}  // namespace

Verdict judge_candidate(const PolicyHost& host, const WheelEntry& wheel, const std::optional<std::size_t>& rank) {
    if (!rank) return {false, false, "no tag of this wheel (" + join(wheel.tags, ", ") + ") is supported by this interpreter"};
    switch (host.kind) {
        case HostKind::with_gpus: return judge_for_gpus(host, wheel);
        case HostKind::build_host: {
            const CudaVersion toolkit = host.input.host.toolkit->cuda;
            if (wheel.cpu_only()) {
                return {false, false, "CPU-only variant; a CUDA toolkit (" + toolkit.str() + ") is present, so a CUDA build host is assumed"};
            }
            if (wheel.cuda->major != toolkit.major) {
                return {false, false, "built with CUDA " + wheel.cuda->str() + "; a build host takes the variant of its toolkit's CUDA major (" +
                                          std::to_string(toolkit.major) + ".x)"};
            }
            if (const std::optional<std::string> problem = host.driver_problem(*wheel.cuda)) return {false, false, *problem};
            return {true, false, "CUDA " + wheel.cuda->str() + " matches the toolkit's CUDA major (toolkit " + toolkit.str() + ")"};
        }
        case HostKind::driver_only:
            if (wheel.cpu_only()) return {true, false, "CPU-only variant: the fallback when no CUDA wheel runs with this driver"};
            if (const std::optional<std::string> problem = host.driver_problem(*wheel.cuda)) return {false, false, *problem};
            return {true, false, "this driver (" + host.driver_text() + ") runs CUDA " + wheel.cuda->str() + " builds"};
        case HostKind::cpu_only:
            if (wheel.cpu_only()) return {true, false, "CPU-only variant for a host without GPU, NVIDIA driver or CUDA toolkit"};
            return {false, false, "CUDA variant; this host has no GPU, no NVIDIA driver and no CUDA toolkit"};
    }
    return {};
}

}  // namespace culina
