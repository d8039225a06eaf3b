// What the selection policy decided, with the evidence: every candidate wheel and why it was
// accepted or rejected. The adapter acts on `action`; people read the reasons.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cuda_version.h"
#include "common/setting_names.h"
#include "host/host_info.h"
#include "manifest/manifest.h"

namespace culina {

enum class Action {
    install_wheel,  // download and verify `wheel`
    build_local,    // compile csrc/ with CUDA for `local_build_archs`
    build_cpu,      // compile the CPU-only variant
    error,          // nothing can serve this host as asked; `reason` says what is missing
};

// "install_wheel", "build_local", "build_cpu", "error"
const char* action_name(Action action);

// The version of the decision document (decision_to_json, and what `resolve` adds). The install
// adapter reads one version (helper_client.DECISION_SCHEMA_VERSION) and refuses another: a change
// a reader of the old form would misread takes the next number.
constexpr int kDecisionSchemaVersion = 1;

struct Candidate {
    std::string file;
    std::string variant;
    std::optional<CudaVersion> cuda;
    std::optional<size_t> tag_rank;  // index in the supported tags; nullopt: no tag fits
    bool accepted = false;           // runs on this host (or fits the build-host assumption)
    bool chosen = false;
    std::string reason;              // "cu130: GPU 0 (7.0) not covered: binary has ..."
};

// The host facts the policy used, repeated so a decision can be read on its own.
struct PolicyHostFacts {
    std::optional<CudaVersion> driver_cuda;
    std::vector<std::string> gpus;  // compute capability per GPU, in index order
    std::optional<CudaVersion> toolkit_cuda;
};

struct Decision {
    Action action = Action::error;
    std::optional<WheelEntry> wheel;  // set for install_wheel
    std::string reason;               // one sentence: why this action
    std::vector<Candidate> candidates;
    std::optional<std::string> assumption;     // no GPU visible: what was assumed ...
    std::optional<std::string> override_hint;  // ... and how to override it
    std::vector<std::string> warnings;
    // Targets for a local build: the detected GPUs' archs ("9.0"), or the configured list
    // when none is visible. Set for every action, so a failed download can fall back.
    std::vector<std::string> local_build_archs;
    std::string variant_request;  // the VARIANT setting as understood: "auto", "cu130", "null", "source"
    // build_local with no toolkit installed: the newest CUDA toolkit from PyPI up to this version
    // (the driver's), which the build asks pip for.
    std::optional<CudaVersion> pypi_toolkit;
    // build_local with an installed toolkit: the nvcc the probe found, which the build must
    // compile with (the decision's architectures were checked against it).
    std::optional<ToolkitInfo> build_toolkit;
    PolicyHostFacts host;
};

nlohmann::json decision_to_json(const Decision& decision);
// A readable multi-line rendering for terminals and `pip install -v` logs. `with_error_reason`
// false leaves an error's reason line out, for a caller that states the reason itself.
std::string decision_to_table(const Decision& decision, const SettingNames& names, bool with_error_reason = true);

}  // namespace culina
