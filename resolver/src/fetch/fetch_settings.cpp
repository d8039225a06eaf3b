#include "fetch/fetch_settings.h"

#include <filesystem>
#include <sys/stat.h>

#include "common/text.h"
#include "fetch/fetch_error.h"

namespace culina::fetch {
namespace {

bool non_empty(const std::optional<std::string>& value) { return value.has_value() && !value->empty(); }


// The first CA variable that is set wins; a set variable that names no readable file is an error,
// not a silent fall-back to the system store.
void resolve_ca_bundle(const EnvLookup& env, FetchSettings& settings) {
    for (const char* name : {"CULINA_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE"}) {
        const std::optional<std::string> value = env(name);
        if (!non_empty(value)) continue;
        struct stat info {};
        if (::stat(value->c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
            throw configuration_error(std::string(name) + "='" + *value +
                               "' does not name a readable file: point it to a PEM file of trusted CA "
                               "certificates, or unset it to use the system CA store");
        }
        settings.ca_bundle = *value;
        settings.ca_bundle_source = name;
        settings.notes.push_back(std::string("trusting the CA certificates in ") + *value + " (from " + name + ")");
        return;
    }
}

}  // namespace

bool parse_offline(const std::optional<std::string>& value) {
    if (!value.has_value() || value->empty() || *value == "0") return false;
    if (*value == "1") return true;
    throw configuration_error("CULINA_OFFLINE='" + *value + "' is not understood: use 1 (no network, cache only) or 0");
}

int parse_count_setting(const char* name, const std::optional<std::string>& value, int minimum, int maximum,
                        int fallback, const char* meaning, std::vector<std::string>& notes) {
    if (!value.has_value()) return fallback;
    if (value->empty()) {
        notes.push_back(std::string(name) + " is set but empty: using the default " + std::to_string(fallback));
        return fallback;
    }
    const std::optional<int> parsed = parse_small_uint(*value);
    if (!parsed || *parsed < minimum || *parsed > maximum) {
        throw configuration_error(std::string(name) + "='" + *value + "' is not understood: expected " + meaning +
                           ", a whole number from " + std::to_string(minimum) + " to " + std::to_string(maximum) +
                           " (default " + std::to_string(fallback) + ")");
    }
    return *parsed;
}

std::string resolve_cache_root(const EnvLookup& env) {
    std::filesystem::path root;
    const std::optional<std::string> home = env("HOME");
    if (const auto dir = env("CULINA_CACHE_DIR"); non_empty(dir)) {
        const std::string& value = *dir;
        if (value == "~" || starts_with(value, "~/")) {
            if (!non_empty(home) || !std::filesystem::path(*home).is_absolute()) {
                throw configuration_error("CULINA_CACHE_DIR='" + value +
                                          "' starts with ~ but HOME is not an absolute path: write the folder out in full");
            }
            root = std::filesystem::path(*home) / value.substr(std::min<std::size_t>(2, value.size()));
        } else if (std::filesystem::path(value).is_absolute()) {
            root = value;
        } else {
            throw configuration_error("CULINA_CACHE_DIR='" + value +
                                      "' is not an absolute path: give one like /var/cache/culina or ~/.cache/culina "
                                      "(~ is your HOME; ~user and relative paths are not accepted)");
        }
    } else if (const auto xdg = env("XDG_CACHE_HOME"); non_empty(xdg) && std::filesystem::path(*xdg).is_absolute()) {
        root = std::filesystem::path(*xdg) / "culina";
    } else if (non_empty(home)) {
        root = std::filesystem::path(*home) / ".cache" / "culina";
    } else {
        throw configuration_error("no cache directory: CULINA_CACHE_DIR, XDG_CACHE_HOME and HOME are all unset; "
                           "set CULINA_CACHE_DIR to a writable folder");
    }
    std::string normal = root.lexically_normal().string();
    if (normal.size() > 1 && normal.back() == '/') normal.pop_back();
    return normal;
}

FetchSettings parse_fetch_settings(const EnvLookup& env) {
    FetchSettings settings;
    settings.timeout_seconds = parse_count_setting("CULINA_TIMEOUT", env("CULINA_TIMEOUT"), 1, 3600, 30,
                                                   "seconds without progress before an attempt is dropped",
                                                   settings.notes);
    settings.retries = parse_count_setting("CULINA_RETRIES", env("CULINA_RETRIES"), 0, 20, 3,
                                           "attempts after the first one for transient failures", settings.notes);
    settings.offline = parse_offline(env("CULINA_OFFLINE"));
    resolve_ca_bundle(env, settings);
    settings.cache_root = resolve_cache_root(env);
    return settings;
}

FetchSettings fetch_settings_from_environment() {
    return parse_fetch_settings([](const char* name) { return get_env(name); });
}

}  // namespace culina::fetch
