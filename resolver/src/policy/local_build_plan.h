// Build planning: when no prebuilt wheel is taken, what to build (CUDA for which architectures
// and with which toolkit, or CPU-only), or why nothing can serve this host and how to fix it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "policy/decision.h"
#include "policy/policy_host.h"

namespace culina {

struct LocalBuildPlan {
    Action action = Action::error;  // build_local, build_cpu or error
    std::string reason;
    std::vector<std::string> archs;           // build_local: the targets
    std::optional<ToolkitInfo> toolkit;        // build_local with the probe's toolkit: that nvcc
    std::optional<CudaVersion> pypi_toolkit;  // build_local with none: the newest PyPI toolkit up to this
    std::vector<std::string> warnings;
};

// The visible GPUs' architectures ("9.0"), or the configured list when none is visible.
std::vector<std::string> detected_build_archs(const PolicyHost& host);

// `why` no wheel is taken opens the reason; `wheels_allowed`: the fixes may suggest a wheel
// (a newer driver for one); `candidates` are the judged wheels, in manifest order.
LocalBuildPlan plan_local_build(const PolicyHost& host, const std::vector<Candidate>& candidates, const std::string& why,
                                bool wheels_allowed);

}  // namespace culina
