// Candidate judging: whether one wheel of the manifest runs on this host, as a pure function of
// the wheel, its tag rank and the host (docs/ARCHITECTURE.md "The selection policy").
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "manifest/manifest.h"
#include "policy/policy_host.h"

namespace culina {

struct Verdict {
    bool fits = false;
    bool via_ptx = false;  // fits only because the driver JIT-compiles PTX for some GPU
    std::string reason;
};

// `rank`: the wheel's best tag among the interpreter's (nullopt: none fits).
Verdict judge_candidate(const PolicyHost& host, const WheelEntry& wheel, const std::optional<std::size_t>& rank);

}  // namespace culina
