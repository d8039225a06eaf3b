#include "policy/local_build_plan.h"

#include <algorithm>

#include "common/text.h"
#include "facts/cuda_facts.h"
#include "policy/arch_coverage.h"
#include "policy/build_archs.h"
#include "policy/driver_compat.h"

namespace culina {
namespace {

// "a", "a or b", "a, b or c"
std::string join_alternatives(const std::vector<std::string>& items) {
    if (items.size() < 2) return join(items, "");
    return join(std::vector<std::string>(items.begin(), items.end() - 1), ", ") + " or " + items.back();
}

LocalBuildPlan fail(const std::string& reason) {
    LocalBuildPlan plan;
    plan.reason = reason;
    return plan;
}

LocalBuildPlan build_cpu(const std::string& reason) {
    LocalBuildPlan plan;
    plan.action = Action::build_cpu;
    plan.reason = reason;
    return plan;
}

// Why a CUDA `toolkit` cannot build for each GPU group here ("label: reason"); empty when it
// can build for all of them.
std::vector<std::string> gpu_build_problems(const PolicyHost& host, const CudaVersion& toolkit) {
    std::vector<std::string> problems;
    for (const GpuGroup& group : host.gpus) {
        if (const std::optional<std::string> problem = toolkit_arch_problem(toolkit, sass_for(group.cc))) {
            problems.push_back(group.label() + ": " + *problem);
        }
    }
    return problems;
}

// The driver's CUDA version, when a toolkit of it from PyPI can build for every GPU here.
std::optional<CudaVersion> pypi_toolkit_for_gpus(const PolicyHost& host) {
    const std::optional<CudaVersion>& driver = host.input.host.driver.cuda;
    if (!host.input.pypi_toolkit_allowed || !driver || driver->major < cuda_facts().pypi_nvcc_first_major) return std::nullopt;
    return gpu_build_problems(host, *driver).empty() ? driver : std::nullopt;
}

std::vector<std::string> fixes_for_gpus(const PolicyHost& host, const std::vector<Candidate>& candidates,
                                        bool wheels_allowed) {
    std::vector<std::string> fixes;
    const std::optional<CudaVersion>& driver = host.input.host.driver.cuda;
    if (wheels_allowed) {
        // The wheel needing the oldest driver among those that would cover every GPU if only the
        // driver were new enough.
        const WheelEntry* rescue = nullptr;
        for (size_t i = 0; i < host.input.manifest.wheels.size(); ++i) {
            const WheelEntry& wheel = host.input.manifest.wheels[i];
            if (wheel.cpu_only() || !candidates[i].tag_rank) continue;
            const WheelTargets targets = WheelTargets::of(wheel);
            const bool covers_all = std::all_of(host.gpus.begin(), host.gpus.end(),
                                                [&](const GpuGroup& g) { return cover_gpu(targets, g.cc, targets.build).covered; });
            if (covers_all && (rescue == nullptr || *wheel.cuda < *rescue->cuda)) rescue = &wheel;
        }
        if (rescue != nullptr && driver && !driver_runs_sass_of(*driver, *rescue->cuda)) {
            fixes.push_back("update the NVIDIA driver to " + describe_driver_needed_for(*rescue->cuda) + " to use the " +
                            rescue->variant + " wheel");
        }
    }
    std::vector<std::string> usable_toolkits;
    for (const CudaVersion& toolkit : cuda_facts().toolkits_to_suggest) {
        if (gpu_build_problems(host, toolkit).empty() && !host.driver_problem(toolkit)) {
            usable_toolkits.push_back(std::to_string(toolkit.major) + ".x");
        }
    }
    if (usable_toolkits.empty()) {
        fixes.push_back("update the NVIDIA driver and install a CUDA toolkit that supports " + host.gpu_list());
    } else {
        fixes.push_back("install a CUDA " + join_alternatives(usable_toolkits) + " toolkit (nvcc on PATH or CUDA_HOME) to build locally");
    }
    fixes.push_back("set " + host.variable("VARIANT") + "=null to install the CPU-only variant on purpose");
    return fixes;
}

LocalBuildPlan build_for_gpus(const PolicyHost& host, const std::vector<Candidate>& candidates, const std::string& why,
                              bool wheels_allowed) {
    const std::optional<ToolkitInfo>& toolkit = host.input.host.toolkit;
    const std::vector<std::string> archs = detected_build_archs(host);
    std::vector<std::string> problems;
    if (toolkit) {
        problems = gpu_build_problems(host, toolkit->cuda);
        if (const std::optional<std::string> problem = host.driver_problem(toolkit->cuda)) problems.push_back("code " + *problem);
        if (problems.empty()) {
            LocalBuildPlan plan;
            plan.action = Action::build_local;
            plan.archs = archs;
            plan.toolkit = toolkit;
            plan.reason = why + "; building locally with the CUDA " + toolkit->cuda.str() + " toolkit for " + join(archs, ";");
            return plan;
        }
    } else if (const std::optional<CudaVersion> pypi = pypi_toolkit_for_gpus(host)) {
        LocalBuildPlan plan;
        plan.action = Action::build_local;
        plan.archs = archs;
        plan.pypi_toolkit = pypi;
        plan.reason = why + "; no CUDA toolkit is installed, so building locally for " + join(archs, ";") +
                      " with the newest CUDA " + std::to_string(pypi->major) + " toolkit from NVIDIA's PyPI packages up to " +
                      pypi->str() + " (what this driver runs)";
        return plan;
    }
    const std::string what_is_missing =
        toolkit ? "the CUDA " + toolkit->cuda.str() + " toolkit cannot build for it (" + join(problems, "; ") + ")"
                : "no CUDA toolkit (nvcc under CUDA_HOME or CUDA_PATH, or on PATH) was found to build locally" +
                      std::string(host.input.pypi_toolkit_allowed ? "" : ", and " + host.variable("OFFLINE") + "=1 forbids fetching one from PyPI");
    return fail(why + " (" + host.gpu_list() + ", driver " + host.driver_text() + "), and " + what_is_missing + ". Fix: " +
                join(fixes_for_gpus(host, candidates, wheels_allowed), "; or ") + ".");
}

}  // namespace

std::vector<std::string> detected_build_archs(const PolicyHost& host) {
    if (host.gpus.empty()) return host.input.default_archs;
    std::vector<ComputeCapability> ccs;
    for (const GpuGroup& group : host.gpus) ccs.push_back(group.cc);
    std::sort(ccs.begin(), ccs.end());
    std::vector<std::string> archs;
    for (const ComputeCapability& cc : ccs) archs.push_back(cc.str());
    return archs;
}

LocalBuildPlan plan_local_build(const PolicyHost& host, const std::vector<Candidate>& candidates, const std::string& why,
                                bool wheels_allowed) {
    switch (host.kind) {
        case HostKind::with_gpus: return build_for_gpus(host, candidates, why, wheels_allowed);
        case HostKind::build_host: {
            const ToolkitInfo& toolkit = *host.input.host.toolkit;
            LocalBuildPlan plan;
            std::vector<std::string> dropped;
            plan.archs = archs_buildable_by(host.input.default_archs, toolkit.cuda, dropped);
            for (const std::string& arch : dropped) plan.warnings.push_back("the local build skips configured architecture " + arch);
            if (plan.archs.empty()) {
                plan.reason = why + ", and the CUDA " + toolkit.cuda.str() + " toolkit can build none of the configured architectures (" +
                              join(host.input.default_archs, ";") + "); set " + host.variable("CUDA_ARCHS") +
                              " to architectures it supports";
                return plan;
            }
            plan.action = Action::build_local;
            plan.toolkit = toolkit;
            plan.reason = why + "; building locally with the CUDA " + toolkit.cuda.str() + " toolkit for the configured architectures";
            return plan;
        }
        case HostKind::driver_only: {
            LocalBuildPlan plan = build_cpu(why + "; no GPU is visible and no CUDA toolkit was found, so building the CPU-only variant");
            plan.warnings.push_back("no CUDA toolkit was found, so the local build is CPU-only");
            return plan;
        }
        case HostKind::cpu_only: return build_cpu(why + "; building the CPU-only variant locally" + host.no_rocm_note());
    }
    return fail(why);
}

}  // namespace culina
