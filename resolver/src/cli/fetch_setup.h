// How `fetch` and `resolve` set up a download: settings from the environment, an optional
// --cache-dir, logs and progress on stderr, and what the manifest promises about the asset.
#pragma once

#include <optional>
#include <string>

#include "fetch/fetch_wheel.h"
#include "manifest/manifest.h"

namespace culina::cli {

// Throws fetch::FetchError(configuration) for a malformed CULINA_TIMEOUT, CULINA_RETRIES, ...
fetch::FetchOptions fetch_options_for(const std::string& command, const std::optional<std::string>& cache_dir,
                                      bool allow_http);

// --base-url, else CULINA_RELEASE_URL: a URL or a local release folder; nullopt when neither is set.
std::optional<std::string> release_base_url(const std::optional<std::string>& flag);

fetch::WheelExpectation expectation_for(const Manifest& manifest, const WheelEntry& wheel, const std::string& base_url);

}  // namespace culina::cli
