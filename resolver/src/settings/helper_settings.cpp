#include "settings/helper_settings.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <utility>

#include "common/setting_error.h"
#include "common/text.h"
#include "fetch/release_location.h"
#include "fetch/url_policy.h"

namespace culina {
namespace {

bool parse_variant(const std::string& value, HelperSettings& settings) {
    const std::optional<VariantRequest> request = parse_variant_request(value);
    if (request) settings.variant = *request;
    return request.has_value();
}

// "" means no driver.
bool parse_override_cuda(const std::string& value, HelperSettings& settings) {
    if (trim(value).empty()) {
        settings.probe.override_cuda = std::optional<CudaVersion>();
        return true;
    }
    const std::optional<CudaVersion> version = parse_cuda_version(value);
    if (version) settings.probe.override_cuda = version;
    return version.has_value();
}

// "8.6,9.0" or "86;90"; "" means no GPU.
bool parse_override_sm(const std::string& value, HelperSettings& settings) {
    std::vector<ComputeCapability> gpus;
    if (!trim(value).empty()) {
        std::string normalised = value;
        for (char& c : normalised) {
            if (c == ';') c = ',';
        }
        for (const std::string& item : split(normalised, ',')) {
            const std::optional<ComputeCapability> sm = parse_compute_capability(item);
            if (!sm) return false;
            gpus.push_back(*sm);
        }
    }
    settings.probe.override_gpus = gpus;
    return true;
}

bool parse_probe_timeout(const std::string& value, HelperSettings& settings) {
    const std::string text = trim(value);
    char* end = nullptr;
    const double seconds = text.empty() ? NAN : std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !(seconds > 0) || seconds > 3600) return false;
    settings.probe.cuda_timeout = std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
    return true;
}

// A whole number within [minimum, maximum]; empty keeps the default and says so in the log.
bool parse_count(const std::string& value, int minimum, int maximum, int& slot, const std::string& name,
                 std::vector<std::string>& notes) {
    if (value.empty()) {
        notes.push_back(name + " is set but empty: using the default " + std::to_string(slot));
        return true;
    }
    const std::optional<int> parsed = parse_small_uint(value);
    if (!parsed || *parsed < minimum || *parsed > maximum) return false;
    slot = *parsed;
    return true;
}

bool parse_timeout(const std::string& value, HelperSettings& settings) {
    return parse_count(value, 1, 3600, settings.fetch.timeout_seconds, settings.names.of("TIMEOUT"), settings.fetch.notes);
}

bool parse_retries(const std::string& value, HelperSettings& settings) {
    return parse_count(value, 0, 20, settings.fetch.retries, settings.names.of("RETRIES"), settings.fetch.notes);
}

// Up to 1 GiB/s: a floor above that would refuse every real link.
bool parse_min_rate(const std::string& value, HelperSettings& settings) {
    return parse_count(value, 1, 1 << 20, settings.fetch.min_rate_kib, settings.names.of("MIN_RATE"),
                       settings.fetch.notes);
}

// A switch as pip, uv and systemd spell one: 1/true/yes/on or 0/false/no/off in any case; ""
// keeps the default (off). Blanks around the word are refused, as everywhere else in the table.
bool parse_switch(const std::string& value, bool& slot) {
    static const std::pair<const char*, bool> kWords[] = {{"1", true},  {"true", true},   {"yes", true}, {"on", true},
                                                           {"0", false}, {"false", false}, {"no", false}, {"off", false}};
    if (value.empty()) return true;
    const std::string word = lowercase(value);
    for (const auto& [text, on] : kWords) {
        if (word == text) {
            slot = on;
            return true;
        }
    }
    return false;
}

bool parse_offline(const std::string& value, HelperSettings& settings) { return parse_switch(value, settings.fetch.offline); }

bool parse_only_binary(const std::string& value, HelperSettings& settings) {
    return parse_switch(value, settings.fallback.never);
}

bool parse_build_on_mismatch(const std::string& value, HelperSettings& settings) {
    return parse_switch(value, settings.fallback.after_mismatch);
}

// A set variable that names no readable file is an error, never a silent fall-back to the
// system store; empty is unset.
bool parse_ca_bundle(const std::string& value, HelperSettings& settings) {
    if (value.empty()) return true;
    struct stat info {};
    if (::stat(value.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return false;
    settings.fetch.ca_bundle = value;
    settings.fetch.ca_bundle_source = settings.names.of("CA_BUNDLE");
    return true;
}

bool parse_cache_dir(const std::string& value, HelperSettings& settings) {
    if (value.empty()) return true;
    if (!fetch::is_cache_dir_form(value)) return false;
    settings.fetch.cache_dir = value;
    return true;
}

bool parse_release_url(const std::string& value, HelperSettings& settings) {
    if (value.empty()) return true;
    if (!fetch::is_release_location(value)) return false;
    settings.release_url = value;
    return true;
}

// Each setting's default as `version --json` shows it, read off the defaults themselves.
std::string shown_switch(bool on) { return on ? "on" : "off"; }
std::string shown_variant(const HelperSettings& settings) {
    return settings.variant.kind == VariantRequest::Kind::automatic ? "auto" : settings.variant.label;
}
std::string shown_offline(const HelperSettings& settings) { return shown_switch(settings.fetch.offline); }
std::string shown_probed(const HelperSettings&) { return "unset: what the probe finds"; }
std::string shown_probe_timeout(const HelperSettings& settings) {
    return std::to_string(settings.probe.cuda_timeout.count() / 1000);
}
std::string shown_timeout(const HelperSettings& settings) { return std::to_string(settings.fetch.timeout_seconds); }
std::string shown_retries(const HelperSettings& settings) { return std::to_string(settings.fetch.retries); }
std::string shown_min_rate(const HelperSettings& settings) { return std::to_string(settings.fetch.min_rate_kib); }
std::string shown_ca_bundle(const HelperSettings&) { return "unset: SSL_CERT_FILE, CURL_CA_BUNDLE, else the system store"; }
std::string shown_cache_dir(const HelperSettings& settings) {
    return "$XDG_CACHE_HOME/" + settings.names.caller() + ", else ~/.cache/" + settings.names.caller();
}
std::string shown_release_url(const HelperSettings&) { return "unset: no release"; }
std::string shown_only_binary(const HelperSettings& settings) { return shown_switch(settings.fallback.never); }
std::string shown_build_on_mismatch(const HelperSettings& settings) { return shown_switch(settings.fallback.after_mismatch); }

}  // namespace

// How every switch may be written (parse_switch), as its accepted form says it.
#define SWITCH_FORMS "1, true, yes or on; 0, false, no or off (any case; empty: off)"

const SettingSpec kSettingSpecs[] = {
    {"VARIANT", "choice",
     "auto, source, null (alias cpu), or a release label such as cu129 or cu130 (1-16 characters of a-z, 0-9, "
     "'.', '_'); empty means auto",
     shown_variant, parse_variant, false},
    {"OFFLINE", "switch", "a switch: on means no network, the cache only; " SWITCH_FORMS, shown_offline, parse_offline, false},
    {"OVERRIDE_CUDA", "CUDA version", "the driver's CUDA version like '12.9' or '13.0' (empty: no driver)", shown_probed, parse_override_cuda, false},
    {"OVERRIDE_SM", "compute capabilities", "compute capabilities separated by commas, like '8.6,9.0' or '86,90' (empty: no GPU)",
     shown_probed, parse_override_sm, false},
    {"PROBE_TIMEOUT", "seconds", "seconds between 0 and 3600, like '15' or '0.5'", shown_probe_timeout, parse_probe_timeout, false},
    {"TIMEOUT", "seconds",
     "seconds without progress before an attempt is dropped, a whole number from 1 to 3600 (default 30; empty: "
     "the default)",
     shown_timeout, parse_timeout, false},
    {"RETRIES", "whole number", "attempts after the first one for transient failures, a whole number from 0 to 20 (default 3; "
                "empty: the default)",
     shown_retries, parse_retries, false},
    {"MIN_RATE", "KiB/s",
     "the slowest average download rate accepted, in KiB/s (a download may take the TIMEOUT setting's seconds plus "
     "its size at this rate, retries included): a whole number from 1 to 1048576 (default 32; empty: the default)",
     shown_min_rate, parse_min_rate, false},
    {"CA_BUNDLE", "path",
     "the path of a readable PEM file of trusted CA certificates; unset it to use the system CA store",
     shown_ca_bundle, parse_ca_bundle, false},
    {"CACHE_DIR", "path",
     "an absolute path like /var/cache/NAME, or ~ or ~/... for your HOME (~user and relative paths are not "
     "accepted)",
     shown_cache_dir, parse_cache_dir, false},
    {"RELEASE_URL", "URL or folder",
     "the base URL of the release assets (https://...), or a local release folder (an absolute path or file:///...)",
     shown_release_url, parse_release_url, true},
    {"ONLY_BINARY", "switch",
     "a switch: on never builds locally (a prebuilt wheel is installed or the install stops, like pip's "
     "--only-binary); " SWITCH_FORMS,
     shown_only_binary, parse_only_binary, false},
    {"BUILD_ON_MISMATCH", "switch",
     "a switch: on discards a downloaded wheel that fails its checksum and builds locally; off (the default) stops "
     "the install, since a corrupted or tampered mirror must be noticed; " SWITCH_FORMS,
     shown_build_on_mismatch, parse_build_on_mismatch, false},
};
#undef SWITCH_FORMS
const std::size_t kSettingSpecCount = sizeof(kSettingSpecs) / sizeof(kSettingSpecs[0]);

std::string setting_list(const SettingNames& names) {
    std::string list;
    for (const SettingSpec& spec : kSettingSpecs) list += (list.empty() ? "" : ", ") + names.of(spec.suffix);
    return list;
}

HelperSettings default_helper_settings(const SettingNames& names) {
    HelperSettings settings;
    settings.names = names;
    settings.probe.names = names;
    settings.fetch.names = names;
    return settings;
}

HelperSettings parse_helper_settings(const SettingNames& names, const EnvLookup& env) {
    HelperSettings settings = default_helper_settings(names);
    for (const SettingSpec& spec : kSettingSpecs) {
        const std::string name = names.of(spec.suffix);
        const std::optional<std::string> value = env(name);
        if (value && !spec.parse(*value, settings)) {
            throw SettingError(name, spec.may_hold_credentials ? fetch::redacted_url(*value) : *value, spec.accepted);
        }
    }
    return settings;
}

}  // namespace culina
