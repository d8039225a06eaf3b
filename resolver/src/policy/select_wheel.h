// The selection policy (docs/ARCHITECTURE.md): which prebuilt wheel this host gets, or how to build.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/setting_names.h"
#include "host/host_info.h"
#include "manifest/manifest.h"
#include "policy/build_fallback.h"
#include "policy/decision.h"
#include "policy/variant_request.h"

namespace culina {

struct SelectionInput {
    HostInfo host;
    std::vector<std::string> supported_tags;  // best first
    Manifest manifest;
    // Why the manifest lists no wheels because none could be read (a fetch that failed, offline,
    // no release URL), for the reasons; nullopt when the manifest was read.
    std::optional<std::string> manifest_unavailable;
    VariantRequest request;
    // For a local build when no GPU is visible (parse_arch_list form).
    std::vector<std::string> default_archs;
    // A local build may ask pip for a CUDA toolkit from NVIDIA's PyPI packages (not offline).
    bool pypi_toolkit_allowed = false;
    BuildFallback fallback;  // whether a local build may stand in for a prebuilt wheel
    SettingNames names;  // the settings a message may name (VARIANT, OVERRIDE_SM, ...)
};

// Never throws for a host it cannot serve: that is Action::error with the reason.
Decision select_wheel(const SelectionInput& input);

// What to do when the wheel `file` that select_wheel chose could not be downloaded or verified
// (`why`, from `url` with credentials stripped): build locally, build CPU-only, or an error naming
// what is missing. A wheel the VARIANT setting named, one that failed verification (unless
// BUILD_ON_MISMATCH) and any build under ONLY_BINARY end in an error instead.
Decision select_after_failed_fetch(const SelectionInput& input, const std::string& file, const std::string& url,
                                   FetchFailure failure, const std::string& why);

}  // namespace culina
