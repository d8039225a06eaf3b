// The helper's settings: ONE table of the environment variables it reads, declared in
// settings/settings_table.json (name suffix, type, default, accepted form; embedded at compile time
// and read by the adapter too) and paired here with each variable's typed parser; parsed once at
// the start of every command that reads any of them and passed down as a HelperSettings value. A value the table does not accept stops the command with
// SettingError (variable, value, accepted form) before any probe or decision. Variables the helper
// does not own (PATH, CUDA_HOME, HOME, TMPDIR, SSL_CERT_FILE, ...) are host facts: the probe and
// the fetch read them where they are used. docs/ARCHITECTURE.md "Settings" lists the same table.
#pragma once

#include <optional>
#include <string>
#include <vector>

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
    std::string suffix;    // the variable is prefix + suffix
    std::string type;      // what kind of value: "switch", "seconds", "path", ... (`version --json`)
    std::string accepted;  // the accepted form, as the error message and the docs say it ({caller}: see shown)
    // A value in the accepted form that default_helper_settings parses as the default; empty when
    // unset means something no value says (then `unset` says it).
    std::string default_value;
    std::string unset;
    // Stores the value (set, possibly empty); false when it is not of the accepted form.
    bool (*parse)(const std::string& value, HelperSettings& settings);
    bool redacted;  // a URL that may hold credentials: messages show it redacted

    // The default as `version --json` shows it.
    std::string shown_default(const SettingNames& names) const;
};

// A table text with the caller's short name for "{caller}" (settings_table.json).
std::string shown(const std::string& text, const SettingNames& names);

// Every variable the helper reads, in the order they are parsed: settings_table.json's rows, each
// with its parser. Throws std::logic_error when a row has no parser or a parser no row.
const std::vector<SettingSpec>& setting_specs();

// Every variable of the table under `names`' prefix, comma-separated, for usage texts.
std::string setting_list(const SettingNames& names);

// The defaults, every part naming its variables with `names`.
HelperSettings default_helper_settings(const SettingNames& names);

// Throws SettingError naming prefix + suffix, the value and the accepted form.
HelperSettings parse_helper_settings(const SettingNames& names, const EnvLookup& env);

}  // namespace culina
