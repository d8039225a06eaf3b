// What the environment says about fetching: stall timeout, retries, CA bundle, offline mode and
// the cache root. Parsing is separate from reading the environment so that tests can feed values.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace culina::fetch {

struct FetchSettings {
    int timeout_seconds = 30;  // CULINA_TIMEOUT: no progress for this long drops an attempt; also the connect timeout
    int retries = 3;           // CULINA_RETRIES: attempts after the first one, for transient failures only
    bool offline = false;      // CULINA_OFFLINE=1: only the cache may serve
    std::string ca_bundle;     // empty: libcurl's built-in CA store
    std::string ca_bundle_source;  // the variable that named ca_bundle, for messages
    std::string cache_root;        // absolute
    std::vector<std::string> notes;  // what was decided from the environment, for the log
};

using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// Throws FetchError(configuration) naming the variable, its value and the accepted form.
FetchSettings parse_fetch_settings(const EnvLookup& env);
FetchSettings fetch_settings_from_environment();

// "42" within [minimum, maximum]; an unset or empty value gives `fallback` (and a note for
// the empty case). Throws FetchError(configuration) otherwise.
int parse_count_setting(const char* name, const std::optional<std::string>& value, int minimum, int maximum,
                        int fallback, const char* meaning, std::vector<std::string>& notes);

// CULINA_OFFLINE: unset, empty or "0" is false, "1" true. Throws FetchError(configuration) otherwise.
bool parse_offline(const std::optional<std::string>& value);

// CULINA_CACHE_DIR, else $XDG_CACHE_HOME/culina (when absolute), else $HOME/.cache/culina; the
// result is normalised ("a/../b" is "b", no trailing slash). CULINA_CACHE_DIR must be absolute,
// or "~" or "~/..." for $HOME and below; anything else ("x", "./x", "~user/x") throws
// FetchError(configuration).
std::string resolve_cache_root(const EnvLookup& env);

}  // namespace culina::fetch
