// The helper's settings: ONE table of the environment variables it reads (name suffix, accepted
// form, typed parser), parsed once at the start of every command that reads any of them and
// passed down as a HelperSettings value. A value the table does not accept stops the command with
// SettingError (variable, value, accepted form) before any probe or decision. Variables the helper
// does not own (PATH, CUDA_HOME, HOME, TMPDIR, SSL_CERT_FILE, ...) are host facts: the probe and
// the fetch read them where they are used. docs/ARCHITECTURE.md "Settings" lists the same table.
#pragma once

#include <optional>
#include <string>

#include "common/setting_names.h"
#include "fetch/fetch_settings.h"
#include "policy/build_fallback.h"
#include "policy/variant_request.h"
#include "probe/probe_settings.h"

namespace culina {

struct HelperSettings {
    SettingNames names;
    VariantRequest variant;                  // VARIANT
    ProbeSettings probe;                     // OVERRIDE_CUDA, OVERRIDE_SM, PROBE_TIMEOUT
    fetch::FetchSettings fetch;              // TIMEOUT, RETRIES, MIN_RATE, OFFLINE, CA_BUNDLE, CACHE_DIR
    std::optional<std::string> release_url;  // RELEASE_URL; unset or empty: none
    BuildFallback fallback;                  // ONLY_BINARY, BUILD_ON_MISMATCH
};

struct SettingSpec {
    const char* suffix;    // the variable is prefix + suffix
    const char* type;      // what kind of value: "switch", "seconds", "path", ... (`version --json`)
    const char* accepted;  // the accepted form, as the error message and the docs say it
    // The default as `version --json` shows it, read off default_helper_settings(names).
    std::string (*shown_default)(const HelperSettings& defaults);
    // Stores the value (set, possibly empty); false when it is not of the accepted form.
    bool (*parse)(const std::string& value, HelperSettings& settings);
    bool may_hold_credentials;  // a URL: messages show it redacted
};

// Every variable the helper reads, in the order they are parsed.
extern const SettingSpec kSettingSpecs[];
extern const std::size_t kSettingSpecCount;

// Every variable of the table under `names`' prefix, comma-separated, for usage texts.
std::string setting_list(const SettingNames& names);

// The defaults, every part naming its variables with `names`.
HelperSettings default_helper_settings(const SettingNames& names);

// Throws SettingError naming prefix + suffix, the value and the accepted form.
HelperSettings parse_helper_settings(const SettingNames& names, const EnvLookup& env);

}  // namespace culina
