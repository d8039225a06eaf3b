#include "policy/policy_host.h"

#include <algorithm>

#include "common/text.h"
#include "policy/driver_compat.h"

namespace culina {
namespace {

std::vector<GpuGroup> group_gpus(const std::vector<GpuInfo>& gpus) {
    std::vector<GpuGroup> groups;
    for (const GpuInfo& gpu : gpus) {
        auto group = std::find_if(groups.begin(), groups.end(), [&](const GpuGroup& g) { return g.cc == gpu.sm; });
        if (group == groups.end()) {
            groups.push_back({gpu.sm, {gpu.index}});
        } else {
            group->indexes.push_back(gpu.index);
        }
    }
    return groups;
}

HostKind kind_of(const HostInfo& host) {
    if (!host.gpus.empty()) return HostKind::with_gpus;
    if (host.toolkit) return HostKind::build_host;
    if (host.driver.cuda) return HostKind::driver_only;
    return HostKind::cpu_only;
}

}  // namespace

std::string GpuGroup::label() const {
    std::vector<std::string> numbers;
    for (int index : indexes) numbers.push_back(std::to_string(index));
    return (indexes.size() == 1 ? "GPU " : "GPUs ") + join(numbers, ",") + " (" + cc.str() + ")";
}

PolicyHost::PolicyHost(const SelectionInput& input)
    : input(input), kind(kind_of(input.host)), gpus(group_gpus(input.host.gpus)) {}

std::string PolicyHost::gpu_list() const {
    std::vector<std::string> labels;
    for (const GpuGroup& group : gpus) labels.push_back(group.label());
    return join(labels, ", ");
}

std::string PolicyHost::driver_text() const {
    return input.host.driver.cuda ? "CUDA " + input.host.driver.cuda->str() : "no driver";
}

std::string PolicyHost::amd_gpu_list() const {
    std::vector<std::pair<std::string, std::vector<std::string>>> by_gfx;
    for (const AmdGpuInfo& gpu : input.host.amd_gpus) {
        auto group = std::find_if(by_gfx.begin(), by_gfx.end(), [&](const auto& g) { return g.first == gpu.gfx; });
        if (group == by_gfx.end()) group = by_gfx.insert(by_gfx.end(), {gpu.gfx, {}});
        group->second.push_back(std::to_string(gpu.node));
    }
    std::vector<std::string> labels;
    for (const auto& [gfx, nodes] : by_gfx) {
        labels.push_back((nodes.size() == 1 ? "AMD GPU node " : "AMD GPU nodes ") + join(nodes, ",") + " (" + gfx + ")");
    }
    return join(labels, ", ");
}

std::string PolicyHost::no_rocm_note() const {
    if (input.host.amd_gpus.empty()) return "";
    return "; this host's " + amd_gpu_list() + " cannot be served: culina has no ROCm build, so the CPU build is installed";
}

std::string PolicyHost::release_text() const { return input.manifest.name + " " + input.manifest.version; }

std::string PolicyHost::variable(const char* suffix) const { return input.names.of(suffix); }

std::optional<std::string> PolicyHost::driver_problem(const CudaVersion& build) const {
    const std::optional<CudaVersion>& driver = input.host.driver.cuda;
    if (!driver || driver_runs_sass_of(*driver, build)) return std::nullopt;
    return "built with CUDA " + build.str() + ", needs " + describe_driver_needed_for(build) + "; this driver supports CUDA " +
           driver->str();
}

CudaArch sass_for(const ComputeCapability& cc) {
    CudaArch arch;
    arch.cc = cc;
    return arch;
}

}  // namespace culina
