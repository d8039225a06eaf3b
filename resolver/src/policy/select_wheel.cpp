// docs/ARCHITECTURE.md "The selection policy": every wheel is judged first (candidate_verdict.h),
// the action is then chosen from the verdicts, so the record always shows why; when no wheel is
// taken, local_build_plan.h decides what to build.
#include "policy/select_wheel.h"

#include <algorithm>

#include "common/text.h"
#include "policy/candidate_verdict.h"
#include "policy/local_build_plan.h"
#include "policy/policy_host.h"
#include "policy/tag_rank.h"

namespace culina {
namespace {

class Selector {
public:
    explicit Selector(const SelectionInput& input) : host_(input) {
        decision_.variant_request = input.request.str();
        decision_.host.driver_cuda = input.host.driver.cuda;
        for (const GpuInfo& gpu : input.host.gpus) decision_.host.gpus.push_back(gpu.sm.str());
        if (input.host.toolkit) decision_.host.toolkit_cuda = input.host.toolkit->cuda;
        decision_.local_build_archs = detected_build_archs(host_);
        for (const WheelEntry& wheel : input.manifest.wheels) {
            Candidate candidate;
            candidate.file = wheel.file;
            candidate.variant = wheel.variant;
            candidate.cuda = wheel.cuda;
            candidate.tag_rank = tag_rank(wheel, input.supported_tags);
            const Verdict verdict = judge_candidate(host_, wheel, candidate.tag_rank);
            candidate.accepted = verdict.fits;
            candidate.reason = verdict.reason;
            via_ptx_.push_back(verdict.via_ptx);
            decision_.candidates.push_back(candidate);
        }
    }

    Decision run() {
        switch (host_.input.request.kind) {
            case VariantRequest::Kind::automatic: return choose_automatically();
            case VariantRequest::Kind::label: return choose_label();
            case VariantRequest::Kind::source: return choose_source();
        }
        return decision_;
    }

    // The chosen wheel could not be fetched: no other wheel is tried (the policy already chose
    // the best), so a local build serves, or the reason says what is missing. A failed check or
    // a wheel asked for by name stops instead: a build there would hide a tampered mirror or
    // ignore what the user asked for.
    Decision after_failed_fetch(const std::string& file, const std::string& url, FetchFailure failure,
                                const std::string& why) {
        set_no_gpu_assumption();
        for (Candidate& candidate : decision_.candidates) {
            if (candidate.file != file) continue;
            candidate.accepted = false;
            candidate.reason += "; fetch failed: " + why;
        }
        const std::string what = "the chosen wheel " + file + " from " + url + " could not be " +
                                 (failure == FetchFailure::verification ? "verified" : "fetched") + " (" + why + ")";
        const VariantRequest& request = host_.input.request;
        if (request.kind == VariantRequest::Kind::label) {
            return fail(what + ". " + host_.variable("VARIANT") + "=" + request.label + " asks for this prebuilt wheel, so " +
                        "nothing is built in its place. Fix: " +
                        (failure == FetchFailure::verification ? "check " + host_.variable("RELEASE_URL") + " and the mirror's files"
                                                               : "check the network and " + host_.variable("RELEASE_URL")) +
                        ", or set " + host_.variable("VARIANT") + "=auto to allow a local build");
        }
        if (failure == FetchFailure::verification && !host_.input.fallback.after_mismatch) {
            return fail(what + ". A wheel that fails its checksum stops the install: the mirror or the download was "
                               "corrupted or tampered with. Fix: check " + host_.variable("RELEASE_URL") +
                        " and the mirror's files, or set " + host_.variable("BUILD_ON_MISMATCH") + "=1 to build locally instead");
        }
        return fall_back_to_build(what, false);
    }

private:
    std::string labels_text() const { return join(host_.input.manifest.variant_labels(), ", "); }

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

    // What the VARIANT setting may be here besides auto: "one of cu130, null, or source",
    // "cu130 or source", or only source (a local build) when no variant has a wheel for this
    // interpreter.
    std::string variant_choices() const {
        const std::vector<std::string> labels = labels_for_this_interpreter();
        if (labels.empty()) {
            return "source to build locally (no wheel of " + host_.release_text() + " is built for this interpreter and platform)";
        }
        if (labels.size() == 1) return labels.front() + " or source";
        return "one of " + join(labels, ", ") + ", or source";
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
        decision_.wheel = host_.input.manifest.wheels[index];
        decision_.candidates[index].chosen = true;
        decision_.reason = reason;
    }

    void set_no_gpu_assumption() {
        switch (host_.kind) {
            case HostKind::with_gpus: return;
            case HostKind::build_host:
                decision_.assumption = "no GPU is visible but a CUDA toolkit is (" + host_.input.host.toolkit->cuda.str() + ", " +
                                       host_.input.host.toolkit->nvcc + "): assumed a CUDA build host, such as a container image build";
                break;
            case HostKind::driver_only:
                decision_.assumption = "no GPU is visible but an NVIDIA driver is (" + host_.driver_text() +
                                       "): assumed its GPUs will be visible at run time";
                break;
            case HostKind::cpu_only:
                decision_.assumption = "no GPU, NVIDIA driver or CUDA toolkit was found: assumed a CPU-only host";
                break;
        }
        decision_.override_hint = "set " + host_.variable("OVERRIDE_SM") + " (e.g. 9.0 or 8.6,9.0) and " + host_.variable("OVERRIDE_CUDA") +
                                  " (e.g. 13.0) to name the "
                                  "target GPUs and driver, or " + host_.variable("VARIANT") + " to " + variant_choices();
    }

    Decision choose_automatically() {
        set_no_gpu_assumption();
        if (!host_.input.host.amd_gpus.empty()) {
            decision_.warnings.push_back(host_.amd_gpu_list() + " not used: culina has no ROCm build");
        }
        const std::vector<size_t> order = accepted_best_first();
        if (order.empty()) {
            const std::optional<std::string>& unavailable = host_.input.manifest_unavailable;
            return fall_back_to_build(unavailable ? *unavailable + ", so no prebuilt wheel can be chosen"
                                                  : "no wheel of " + host_.release_text() + " fits this host",
                                      true);
        }
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
        switch (host_.kind) {
            case HostKind::with_gpus:
                install(best, chosen.variant + " covers every GPU (" + host_.gpu_list() + ") and is the newest CUDA build that does");
                break;
            case HostKind::build_host:
                install(best, chosen.variant + " is the newest wheel for the CUDA toolkit's major (" +
                                  std::to_string(host_.input.host.toolkit->cuda.major) + ".x)");
                break;
            case HostKind::driver_only:
                if (chosen.cuda) {
                    install(best, chosen.variant + " is the newest CUDA build this driver (" + host_.driver_text() + ") runs");
                } else {
                    install(best, "no CUDA wheel runs with this driver (" + host_.driver_text() + ") and no toolkit can build one; the CPU-only wheel");
                    decision_.warnings.push_back("installing the CPU-only variant: update the NVIDIA driver for a CUDA wheel");
                }
                break;
            case HostKind::cpu_only:
                install(best, "the CPU-only wheel, for a host without NVIDIA GPU, driver or toolkit" + host_.no_rocm_note());
                break;
        }
        return decision_;
    }

    Decision choose_label() {
        const std::string& label = host_.input.request.label;
        const std::string setting = host_.variable("VARIANT") + "=" + label;
        if (host_.input.manifest_unavailable) {
            return fail(setting + " asks for a prebuilt wheel, but " + *host_.input.manifest_unavailable +
                        ". Fix: check " + host_.variable("RELEASE_URL") + " and the network, or set " + host_.variable("VARIANT") +
                        "=auto to build locally");
        }
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
        if (host_.input.request.is_cpu() && !best) {
            return build_cpu(setting + ": the release has no CPU-only wheel for this interpreter; building the CPU-only variant locally");
        }
        if (!release_has_label) {
            return fail(setting + ": the " + host_.release_text() + " release has no variant '" + label + "'; it has: " + labels_text() +
                        ". Set " + host_.variable("VARIANT") + " to auto or to " + variant_choices());
        }
        if (!best) {
            return fail(setting + ": no " + label + " wheel fits this interpreter (none of their tags is supported). Set " +
                        host_.variable("VARIANT") + " to auto or to " + variant_choices() + "; or use a Python for which a " + label +
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
            candidate.reason = host_.variable("VARIANT") + "=source: prebuilt wheels are not used";
        }
        set_no_gpu_assumption();
        return fall_back_to_build(host_.variable("VARIANT") + "=source asks for a local build", false);
    }

    // No wheel is taken: build with CUDA where the host can, else CPU-only where no GPU asks
    // for CUDA, else stop and say what is missing.
    Decision fall_back_to_build(const std::string& why, bool wheels_allowed) {
        const LocalBuildPlan plan = plan_local_build(host_, decision_.candidates, why, wheels_allowed);
        if (plan.action != Action::error && host_.input.fallback.never) return refuse_build(plan.reason);
        decision_.action = plan.action;
        decision_.reason = plan.reason;
        if (plan.action == Action::build_local) decision_.local_build_archs = plan.archs;
        decision_.build_toolkit = plan.toolkit;
        decision_.pypi_toolkit = plan.pypi_toolkit;
        decision_.warnings.insert(decision_.warnings.end(), plan.warnings.begin(), plan.warnings.end());
        return decision_;
    }

    Decision build_cpu(const std::string& reason) {
        if (host_.input.fallback.never) return refuse_build(reason);
        decision_.action = Action::build_cpu;
        decision_.reason = reason;
        return decision_;
    }

    // ONLY_BINARY=1: the build the policy would do becomes the reason to stop.
    Decision refuse_build(const std::string& build_reason) {
        const std::string only_binary = host_.variable("ONLY_BINARY") + "=1";
        const std::vector<std::string> labels = labels_for_this_interpreter();
        return fail(only_binary + " forbids a local build, and no prebuilt wheel serves this host: " + build_reason +
                    ". Fix: unset " + host_.variable("ONLY_BINARY") + " to build locally" +
                    (labels.empty() ? std::string()
                                    : ", or force a prebuilt variant with " + host_.variable("VARIANT") + " (" + join(labels, ", ") + ")"));
    }

    Decision fail(const std::string& reason) {
        decision_.action = Action::error;
        decision_.reason = reason;
        return decision_;
    }

    PolicyHost host_;
    Decision decision_;
    std::vector<bool> via_ptx_;  // per candidate: accepted only thanks to PTX JIT
};

}  // namespace

Decision select_wheel(const SelectionInput& input) { return Selector(input).run(); }

Decision select_after_failed_fetch(const SelectionInput& input, const std::string& file, const std::string& url,
                                   FetchFailure failure, const std::string& why) {
    return Selector(input).after_failed_fetch(file, url, failure, why);
}

}  // namespace culina
