// How to fetch: stall timeout, retries, slowest rate, CA bundle, offline mode and the cache. The
// helper's own variables are parsed by the settings table (settings/helper_settings.h); what is
// completed here, at fetch time, comes from host facts: the cache root from HOME or
// XDG_CACHE_HOME, the CA bundle from SSL_CERT_FILE or CURL_CA_BUNDLE when the CA_BUNDLE setting
// is unset.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/setting_names.h"

namespace culina::fetch {

// The defaults are the settings table's (settings_table.json): take a FetchSettings from
// default_helper_settings or parse_helper_settings (settings/helper_settings.h), whose fields the
// table's rows fill; the numbers stay 0 until then.
struct FetchSettings {
    int timeout_seconds = 0;  // TIMEOUT: no progress for this long drops an attempt; also the connect timeout
    int retries = 0;          // RETRIES: attempts after the first one, for transient failures only
    int min_rate_kib = 0;     // MIN_RATE, KiB/s: a download may take TIMEOUT plus its size at this rate
    bool offline = false;     // OFFLINE=1: only the cache may serve
    std::string ca_bundle;    // empty: libcurl's built-in CA store
    std::string ca_bundle_source;         // the variable that named ca_bundle, for messages
    std::optional<std::string> cache_dir;  // CACHE_DIR (or --cache-dir) as given: absolute, ~ or ~/...
    std::string cache_root;                // absolute, from resolve_cache_root; set where a cache is used
    std::vector<std::string> notes;        // what was decided from the environment, for the log
    SettingNames names;                    // for messages naming the settings
};

// CACHE_DIR's accepted form: an absolute path, "~" or "~/...".
bool is_cache_dir_form(const std::string& value);

// cache_dir, else $XDG_CACHE_HOME/<caller> (when absolute), else $HOME/.cache/<caller>, where
// <caller> is names.caller() ("culina" for CULINA_); the result is
// normalised ("a/../b" is "b", no trailing slash). Throws FetchError(configuration) when a "~"
// path meets a HOME that is not absolute, or nothing gives a root.
std::string resolve_cache_root(const std::optional<std::string>& cache_dir, const SettingNames& names,
                               const EnvLookup& host_env);

// The settings with, when CA_BUNDLE is unset, the first of SSL_CERT_FILE and CURL_CA_BUNDLE that
// is set (one that names no readable file is an error, not a silent fall-back to the system
// store), and a note of the bundle in use. Throws FetchError(configuration).
FetchSettings with_host_ca_bundle(FetchSettings settings, const EnvLookup& host_env);

}  // namespace culina::fetch
