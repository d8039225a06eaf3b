// docs/ARCHITECTURE.md "The selection policy", rule by rule. Every wheel becomes a Candidate with a verdict
// first; the action is then chosen from the verdicts, so the record always shows why.
#include "policy/select_wheel.h"

#include "common/text.h"

#include <algorithm>

#include "manifest/cuda_arch.h"
#include "policy/arch_coverage.h"
#include "policy/build_archs.h"
#include "policy/driver_compat.h"
#include "policy/tag_rank.h"

namespace culina {
namespace {

// What the host looks like to the policy; the no-GPU rules differ by what else is present.
enum class HostKind {
    with_gpus,    // at least one GPU visible
    build_host,   // no GPU, a CUDA toolkit: assumed to build for GPUs elsewhere (a container build)
    driver_only,  // no GPU, no toolkit, a driver: GPUs are assumed to appear at run time
    cpu_only,     // no GPU, no driver, no toolkit
};

// The newest CUDA 11, 12 and 13 toolkits this table knows; used to say which toolkit to install.
const CudaVersion kToolkitsToSuggest[] = {{11, 8}, {12, 9}, {13, 0}};

// GPUs of one compute capability; a host of eight H200s is one group.
struct GpuGroup {
    ComputeCapability cc;
    std::vector<int> indexes;

    // "GPU 0 (9.0)", "GPUs 0,1 (9.0)"
    std::string label() const {
        std::vector<std::string> numbers;
        for (int index : indexes) numbers.push_back(std::to_string(index));
        return (indexes.size() == 1 ? "GPU " : "GPUs ") + join(numbers, ",") + " (" + cc.str() + ")";
    }
};

// "a", "a or b", "a, b or c"
std::string join_alternatives(const std::vector<std::string>& items) {
    if (items.size() < 2) return join(items, "");
    return join(std::vector<std::string>(items.begin(), items.end() - 1), ", ") + " or " + items.back();
}

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

CudaArch sass_for(const ComputeCapability& cc) {
    CudaArch arch;
    arch.cc = cc;
    return arch;
}

struct Verdict {
    bool fits = false;
    bool via_ptx = false;
    std::string reason;
};

class Selector {
public:
    explicit Selector(const SelectionInput& input) : input_(input), gpus_(group_gpus(input.host.gpus)) {
        const HostInfo& host = input.host;
        if (!host.gpus.empty()) {
            kind_ = HostKind::with_gpus;
        } else if (host.toolkit) {
            kind_ = HostKind::build_host;
        } else if (host.driver.cuda) {
            kind_ = HostKind::driver_only;
        } else {
            kind_ = HostKind::cpu_only;
        }
        decision_.variant_request = input.request.str();
        decision_.host.driver_cuda = host.driver.cuda;
        for (const GpuInfo& gpu : host.gpus) decision_.host.gpus.push_back(gpu.sm.str());
        if (host.toolkit) decision_.host.toolkit_cuda = host.toolkit->cuda;
        if (gpus_.empty()) {
            decision_.local_build_archs = input.default_archs;
        } else {
            std::vector<ComputeCapability> ccs;
            for (const GpuGroup& group : gpus_) ccs.push_back(group.cc);
            std::sort(ccs.begin(), ccs.end());
            for (const ComputeCapability& cc : ccs) decision_.local_build_archs.push_back(cc.str());
        }
        for (const WheelEntry& wheel : input.manifest.wheels) {
            Candidate candidate;
            candidate.file = wheel.file;
            candidate.variant = wheel.variant;
            candidate.cuda = wheel.cuda;
            candidate.tag_rank = tag_rank(wheel, input.supported_tags);
            const Verdict verdict = evaluate(wheel, candidate.tag_rank);
            candidate.accepted = verdict.fits;
            candidate.reason = verdict.reason;
            via_ptx_.push_back(verdict.via_ptx);
            decision_.candidates.push_back(candidate);
        }
    }

    Decision run() {
        switch (input_.request.kind) {
            case VariantRequest::Kind::automatic: return choose_automatically();
            case VariantRequest::Kind::label: return choose_label();
            case VariantRequest::Kind::source: return choose_source();
        }
        return decision_;
    }

    // The chosen wheel could not be fetched: no other wheel is tried (the policy already chose
    // the best), so a local build serves, or the reason says what is missing.
    Decision after_failed_fetch(const std::string& file, const std::string& why) {
        set_no_gpu_assumption();
        for (Candidate& candidate : decision_.candidates) {
            if (candidate.file != file) continue;
            candidate.accepted = false;
            candidate.reason += "; fetch failed: " + why;
        }
        return fall_back_to_build("the chosen wheel " + file + " could not be fetched (" + why + ")", false);
    }

private:
    // "CULINA_VARIANT" for "VARIANT": the variable the user sets.
    std::string variable(const char* suffix) const { return input_.names.of(suffix); }

    std::string gpu_list() const {
        std::vector<std::string> labels;
        for (const GpuGroup& group : gpus_) labels.push_back(group.label());
        return join(labels, ", ");
    }

    std::string driver_text() const {
        return input_.host.driver.cuda ? "CUDA " + input_.host.driver.cuda->str() : "no driver";
    }

    std::string labels_text() const { return join(input_.manifest.variant_labels(), ", "); }

    // The variants with a wheel for this interpreter and platform, in manifest order: the only
    // labels a hint may suggest (any other stops with "no wheel fits this interpreter").
    std::vector<std::string> labels_for_this_interpreter() const {
        std::vector<std::string> labels;
        for (const Candidate& candidate : decision_.candidates) {
            if (candidate.tag_rank && std::find(labels.begin(), labels.end(), candidate.variant) == labels.end()) {
                labels.push_back(candidate.variant);
            }
        }
        return labels;
    }

    // What CULINA_VARIANT may be set to here besides auto: "one of cu130, null, or source",
    // "cu130 or source", or only source (a local build) when no variant has a wheel for this
    // interpreter.
    std::string variant_choices() const {
        const std::vector<std::string> labels = labels_for_this_interpreter();
        if (labels.empty()) {
            return "source to build locally (no wheel of " + release_text() + " is built for this interpreter and platform)";
        }
        if (labels.size() == 1) return labels.front() + " or source";
        return "one of " + join(labels, ", ") + ", or source";
    }

    std::string release_text() const { return input_.manifest.name + " " + input_.manifest.version; }

    std::optional<std::string> driver_problem(const CudaVersion& build) const {
        const std::optional<CudaVersion>& driver = input_.host.driver.cuda;
        if (!driver || driver_runs_sass_of(*driver, build)) return std::nullopt;
        return "built with CUDA " + build.str() + ", needs " + describe_driver_needed_for(build) + "; this driver supports CUDA " +
               driver->str();
    }

    Verdict evaluate(const WheelEntry& wheel, const std::optional<size_t>& rank) const {
        if (!rank) {
            return {false, false, "no tag of this wheel (" + join(wheel.tags, ", ") + ") is supported by this interpreter"};
        }
        switch (kind_) {
            case HostKind::with_gpus: return evaluate_for_gpus(wheel);
            case HostKind::build_host: {
                const CudaVersion toolkit = input_.host.toolkit->cuda;
                if (wheel.cpu_only()) {
                    return {false, false, "CPU-only variant; a CUDA toolkit (" + toolkit.str() + ") is present, so a CUDA build host is assumed"};
                }
                if (wheel.cuda->major != toolkit.major) {
                    return {false, false, "built with CUDA " + wheel.cuda->str() + "; a build host takes the variant of its toolkit's CUDA major (" +
                                              std::to_string(toolkit.major) + ".x)"};
                }
                if (const std::optional<std::string> problem = driver_problem(*wheel.cuda)) return {false, false, *problem};
                return {true, false, "CUDA " + wheel.cuda->str() + " matches the toolkit's CUDA major (toolkit " + toolkit.str() + ")"};
            }
            case HostKind::driver_only:
                if (wheel.cpu_only()) return {true, false, "CPU-only variant: the fallback when no CUDA wheel runs with this driver"};
                if (const std::optional<std::string> problem = driver_problem(*wheel.cuda)) return {false, false, *problem};
                return {true, false, "this driver (" + driver_text() + ") runs CUDA " + wheel.cuda->str() + " builds"};
            case HostKind::cpu_only:
                if (wheel.cpu_only()) return {true, false, "CPU-only variant for a host without GPU, NVIDIA driver or CUDA toolkit"};
                return {false, false, "CUDA variant; this host has no GPU, no NVIDIA driver and no CUDA toolkit"};
        }
        return {};
    }

    Verdict evaluate_for_gpus(const WheelEntry& wheel) const {
        if (wheel.cpu_only()) {
            return {false, false, "CPU-only variant; this host has " + gpu_list() + ", which a CUDA wheel or a local CUDA build must serve"};
        }
        if (!input_.host.driver.cuda) {
            return {false, false, "no NVIDIA driver CUDA version was found, so no CUDA wheel can be loaded"};
        }
        if (const std::optional<std::string> problem = driver_problem(*wheel.cuda)) return {false, false, *problem};
        const WheelTargets targets = WheelTargets::of(wheel);
        std::vector<std::string> covered;
        std::vector<std::string> uncovered;
        bool via_ptx = false;
        for (const GpuGroup& group : gpus_) {
            const GpuCoverage coverage = cover_gpu(targets, group.cc, *input_.host.driver.cuda);
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

    // Indexes of accepted candidates, best first: newest build CUDA, then best tag rank, then
    // manifest order. The CPU-only variant (no CUDA) sorts last.
    std::vector<size_t> accepted_best_first() const {
        std::vector<size_t> order;
        for (size_t i = 0; i < decision_.candidates.size(); ++i) {
            if (decision_.candidates[i].accepted) order.push_back(i);
        }
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
            const Candidate& left = decision_.candidates[a];
            const Candidate& right = decision_.candidates[b];
            if (left.cuda != right.cuda) return right.cuda < left.cuda;
            return *left.tag_rank < *right.tag_rank;
        });
        return order;
    }

    void install(size_t index, const std::string& reason) {
        decision_.action = Action::install_wheel;
        decision_.wheel = input_.manifest.wheels[index];
        decision_.candidates[index].chosen = true;
        decision_.reason = reason;
    }

    void set_no_gpu_assumption() {
        switch (kind_) {
            case HostKind::with_gpus: return;
            case HostKind::build_host:
                decision_.assumption = "no GPU is visible but a CUDA toolkit is (" + input_.host.toolkit->cuda.str() + ", " +
                                       input_.host.toolkit->nvcc + "): assumed a CUDA build host, such as a container image build";
                break;
            case HostKind::driver_only:
                decision_.assumption = "no GPU is visible but an NVIDIA driver is (" + driver_text() +
                                       "): assumed its GPUs will be visible at run time";
                break;
            case HostKind::cpu_only:
                decision_.assumption = "no GPU, NVIDIA driver or CUDA toolkit was found: assumed a CPU-only host";
                break;
        }
        decision_.override_hint = "set " + variable("OVERRIDE_SM") + " (e.g. 9.0 or 8.6,9.0) and " + variable("OVERRIDE_CUDA") +
                                  " (e.g. 13.0) to name the "
                                  "target GPUs and driver, or " + variable("VARIANT") + " to " + variant_choices();
    }

    Decision choose_automatically() {
        set_no_gpu_assumption();
        const std::vector<size_t> order = accepted_best_first();
        if (order.empty()) return fall_back_to_build("no wheel of " + release_text() + " fits this host", true);
        const size_t best = order.front();
        const Candidate& chosen = decision_.candidates[best];
        for (size_t i : order) {
            if (i == best) continue;
            Candidate& runner_up = decision_.candidates[i];
            runner_up.reason += runner_up.cuda == chosen.cuda ? "; not chosen: " + chosen.variant + " has a better tag rank"
                                                               : "; not chosen: " + chosen.variant + " is built with a newer CUDA";
        }
        if (via_ptx_[best]) {
            decision_.warnings.push_back("some GPUs run " + chosen.variant +
                                         " from PTX: the driver compiles it at first use, so the first run is slower");
        }
        switch (kind_) {
            case HostKind::with_gpus:
                install(best, chosen.variant + " covers every GPU (" + gpu_list() + ") and is the newest CUDA build that does");
                break;
            case HostKind::build_host:
                install(best, chosen.variant + " is the newest wheel for the CUDA toolkit's major (" +
                                  std::to_string(input_.host.toolkit->cuda.major) + ".x)");
                break;
            case HostKind::driver_only:
                if (chosen.cuda) {
                    install(best, chosen.variant + " is the newest CUDA build this driver (" + driver_text() + ") runs");
                } else {
                    install(best, "no CUDA wheel runs with this driver (" + driver_text() + ") and no toolkit can build one; the CPU-only wheel");
                    decision_.warnings.push_back("installing the CPU-only variant: update the NVIDIA driver for a CUDA wheel");
                }
                break;
            case HostKind::cpu_only:
                install(best, "the CPU-only wheel, for a host without GPU, driver or toolkit");
                break;
        }
        return decision_;
    }

    Decision choose_label() {
        const std::string& label = input_.request.label;
        const std::string setting = variable("VARIANT") + "=" + label;
        std::optional<size_t> best;
        bool release_has_label = false;
        for (size_t i = 0; i < decision_.candidates.size(); ++i) {
            Candidate& candidate = decision_.candidates[i];
            if (candidate.variant != label) {
                candidate.accepted = false;
                candidate.reason = "not the requested variant (" + setting + ")";
                continue;
            }
            release_has_label = true;
            if (candidate.tag_rank && (!best || *candidate.tag_rank < *decision_.candidates[*best].tag_rank)) best = i;
        }
        if (input_.request.is_cpu() && !best) {
            return build_cpu(setting + ": the release has no CPU-only wheel for this interpreter; building the CPU-only variant locally");
        }
        if (!release_has_label) {
            return fail(setting + ": the " + release_text() + " release has no variant '" + label + "'; it has: " + labels_text() +
                        ". Set " + variable("VARIANT") + " to auto or to " + variant_choices());
        }
        if (!best) {
            return fail(setting + ": no " + label + " wheel fits this interpreter (none of their tags is supported). Set " +
                        variable("VARIANT") + " to auto or to " + variant_choices() + "; or use a Python for which a " + label +
                        " wheel exists");
        }
        const Candidate& chosen = decision_.candidates[*best];
        if (!chosen.accepted) {
            decision_.warnings.push_back(setting + " forces a wheel this host may not run: " + chosen.reason);
        }
        install(*best, setting + " asks for this variant");
        return decision_;
    }

    Decision choose_source() {
        for (Candidate& candidate : decision_.candidates) {
            candidate.accepted = false;
            candidate.reason = variable("VARIANT") + "=source: prebuilt wheels are not used";
        }
        set_no_gpu_assumption();
        return fall_back_to_build(variable("VARIANT") + "=source asks for a local build", false);
    }

    // No wheel is taken: build with CUDA where the host can, else CPU-only where no GPU asks
    // for CUDA, else stop and say what is missing.
    Decision fall_back_to_build(const std::string& why, bool wheels_allowed) {
        switch (kind_) {
            case HostKind::with_gpus: return build_for_gpus(why, wheels_allowed);
            case HostKind::build_host: {
                const CudaVersion toolkit = input_.host.toolkit->cuda;
                std::vector<std::string> dropped;
                decision_.local_build_archs = archs_buildable_by(input_.default_archs, toolkit, dropped);
                for (const std::string& arch : dropped) {
                    decision_.warnings.push_back("the local build skips configured architecture " + arch);
                }
                if (decision_.local_build_archs.empty()) {
                    return fail(why + ", and the CUDA " + toolkit.str() + " toolkit can build none of the configured architectures (" +
                                join(input_.default_archs, ";") + "); set " + variable("CUDA_ARCHS") + " to architectures it supports");
                }
                decision_.action = Action::build_local;
                decision_.reason = why + "; building locally with the CUDA " + toolkit.str() + " toolkit for the configured architectures";
                return decision_;
            }
            case HostKind::driver_only:
                decision_.warnings.push_back("no CUDA toolkit was found, so the local build is CPU-only");
                return build_cpu(why + "; no GPU is visible and no CUDA toolkit was found, so building the CPU-only variant");
            case HostKind::cpu_only:
                return build_cpu(why + "; building the CPU-only variant locally");
        }
        return decision_;
    }

    Decision build_for_gpus(const std::string& why, bool wheels_allowed) {
        const std::optional<ToolkitInfo>& toolkit = input_.host.toolkit;
        std::vector<std::string> problems;
        if (toolkit) {
            for (const GpuGroup& group : gpus_) {
                if (const std::optional<std::string> problem = toolkit_arch_problem(toolkit->cuda, sass_for(group.cc))) {
                    problems.push_back(group.label() + ": " + *problem);
                }
            }
            const std::optional<CudaVersion>& driver = input_.host.driver.cuda;
            if (driver && !driver_runs_sass_of(*driver, toolkit->cuda)) {
                problems.push_back("code built by CUDA " + toolkit->cuda.str() + " needs " + describe_driver_needed_for(toolkit->cuda) +
                                   "; this driver supports CUDA " + driver->str());
            }
            if (problems.empty()) {
                decision_.action = Action::build_local;
                decision_.reason = why + "; building locally with the CUDA " + toolkit->cuda.str() + " toolkit for " +
                                   join(decision_.local_build_archs, ";");
                return decision_;
            }
        }
        if (!toolkit) {
            if (const std::optional<CudaVersion> pypi = pypi_toolkit_for_gpus()) {
                decision_.action = Action::build_local;
                decision_.pypi_toolkit = pypi;
                decision_.reason = why + "; no CUDA toolkit is installed, so building locally for " +
                                   join(decision_.local_build_archs, ";") + " with the newest CUDA " +
                                   std::to_string(pypi->major) + " toolkit from NVIDIA's PyPI packages up to " +
                                   pypi->str() + " (what this driver runs)";
                return decision_;
            }
        }
        const std::string what_is_missing =
            toolkit ? "the CUDA " + toolkit->cuda.str() + " toolkit cannot build for it (" + join(problems, "; ") + ")"
                    : "no CUDA toolkit (nvcc under CUDA_HOME or CUDA_PATH, or on PATH) was found to build locally" +
                          std::string(input_.pypi_toolkit_allowed ? "" : ", and " + variable("OFFLINE") + "=1 forbids fetching one from PyPI");
        return fail(why + " (" + gpu_list() + ", driver " + driver_text() + "), and " + what_is_missing + ". Fix: " +
                    join(fixes_for_gpus(wheels_allowed), "; or ") + ".");
    }

    // The driver's CUDA version, when a toolkit of it from PyPI can build for every GPU here.
    std::optional<CudaVersion> pypi_toolkit_for_gpus() const {
        const std::optional<CudaVersion>& driver = input_.host.driver.cuda;
        if (!input_.pypi_toolkit_allowed || !driver || driver->major < kFirstMajorWithPypiNvcc) return std::nullopt;
        const bool builds_all = std::all_of(gpus_.begin(), gpus_.end(), [&](const GpuGroup& g) {
            return !toolkit_arch_problem(*driver, sass_for(g.cc));
        });
        return builds_all ? driver : std::nullopt;
    }

    std::vector<std::string> fixes_for_gpus(bool wheels_allowed) const {
        std::vector<std::string> fixes;
        if (wheels_allowed) {
            // The wheel needing the oldest driver among those that would cover every GPU if
            // only the driver were new enough.
            const WheelEntry* rescue = nullptr;
            for (size_t i = 0; i < input_.manifest.wheels.size(); ++i) {
                const WheelEntry& wheel = input_.manifest.wheels[i];
                if (wheel.cpu_only() || !decision_.candidates[i].tag_rank) continue;
                const WheelTargets targets = WheelTargets::of(wheel);
                const bool covers_all = std::all_of(gpus_.begin(), gpus_.end(),
                                                    [&](const GpuGroup& g) { return cover_gpu(targets, g.cc, targets.build).covered; });
                if (covers_all && (rescue == nullptr || *wheel.cuda < *rescue->cuda)) rescue = &wheel;
            }
            const std::optional<CudaVersion>& driver = input_.host.driver.cuda;
            if (rescue != nullptr && driver && !driver_runs_sass_of(*driver, *rescue->cuda)) {
                fixes.push_back("update the NVIDIA driver to " + describe_driver_needed_for(*rescue->cuda) + " to use the " +
                                rescue->variant + " wheel");
            }
        }
        std::vector<std::string> usable_toolkits;
        const std::optional<CudaVersion>& driver = input_.host.driver.cuda;
        for (const CudaVersion& toolkit : kToolkitsToSuggest) {
            const bool builds_all = std::all_of(gpus_.begin(), gpus_.end(), [&](const GpuGroup& g) {
                return !toolkit_arch_problem(toolkit, sass_for(g.cc));
            });
            if (builds_all && (!driver || driver_runs_sass_of(*driver, toolkit))) {
                usable_toolkits.push_back(std::to_string(toolkit.major) + ".x");
            }
        }
        if (usable_toolkits.empty()) {
            fixes.push_back("update the NVIDIA driver and install a CUDA toolkit that supports " + gpu_list());
        } else {
            fixes.push_back("install a CUDA " + join_alternatives(usable_toolkits) + " toolkit (nvcc on PATH or CUDA_HOME) to build locally");
        }
        fixes.push_back("set " + variable("VARIANT") + "=null to install the CPU-only variant on purpose");
        return fixes;
    }

    Decision build_cpu(const std::string& reason) {
        decision_.action = Action::build_cpu;
        decision_.reason = reason;
        return decision_;
    }

    Decision fail(const std::string& reason) {
        decision_.action = Action::error;
        decision_.reason = reason;
        return decision_;
    }

    const SelectionInput& input_;
    std::vector<GpuGroup> gpus_;
    HostKind kind_ = HostKind::cpu_only;
    Decision decision_;
    std::vector<bool> via_ptx_;  // per candidate: accepted only thanks to PTX JIT
};

}  // namespace

Decision select_wheel(const SelectionInput& input) { return Selector(input).run(); }

Decision select_after_failed_fetch(const SelectionInput& input, const std::string& file, const std::string& why) {
    return Selector(input).after_failed_fetch(file, why);
}

}  // namespace culina
