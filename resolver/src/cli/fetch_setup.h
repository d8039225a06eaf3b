// How `fetch`, `mirror` and `resolve` set up a download: the parsed settings, an optional
// --cache-dir, logs and progress on stderr, and what the manifest promises about the asset.
#pragma once

#include <optional>
#include <string>

#include "fetch/fetch_wheel.h"
#include "manifest/manifest.h"
#include "settings/helper_settings.h"

namespace culina::cli {

// The settings completed from host facts (HOME, XDG_CACHE_HOME, SSL_CERT_FILE, CURL_CA_BUNDLE);
// --cache-dir replaces the CACHE_DIR setting. Throws fetch::FetchError(configuration).
fetch::FetchOptions fetch_options_for(const std::string& command, const HelperSettings& settings,
                                      const std::optional<std::string>& cache_dir, bool allow_http);

// --base-url, else the RELEASE_URL setting: a URL or a local release folder; nullopt when neither is set.
std::optional<std::string> release_base_url(const std::optional<std::string>& flag, const HelperSettings& settings);

// "no release URL: pass --base-url or set <PREFIX>RELEASE_URL"
std::string no_release_url_message(const HelperSettings& settings);

fetch::WheelExpectation expectation_for(const Manifest& manifest, const WheelEntry& wheel, const std::string& base_url);

}  // namespace culina::cli
