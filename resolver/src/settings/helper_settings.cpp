#include "settings/helper_settings.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/setting_error.h"
#include "common/text.h"
#include "fetch/release_location.h"
#include "fetch/url_policy.h"
#include "settings_table_text.h"

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

const nlohmann::json& settings_table() {
    static const nlohmann::json table = nlohmann::json::parse(kSettingsTableJson);
    return table;
}

// A switch as pip, uv and systemd spell one: the table's switch_words in any case; "" keeps the
// default. Blanks around the word are refused, as everywhere else in the table.
bool parse_switch(const std::string& value, bool& slot) {
    if (value.empty()) return true;
    const std::string word = lowercase(value);
    for (const auto& [state, on] : {std::pair{"on", true}, std::pair{"off", false}}) {
        for (const nlohmann::json& text : settings_table().at("switch_words").at(state)) {
            if (word == text.get<std::string>()) {
                slot = on;
                return true;
            }
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

std::string replaced(std::string text, const std::string& pattern, const std::string& with) {
    for (std::size_t at = text.find(pattern); at != std::string::npos; at = text.find(pattern, at + with.size())) {
        text.replace(at, pattern.size(), with);
    }
    return text;
}

// "a, b, c or d", as switch_forms lists a state's words.
std::string listed(const std::vector<std::string>& words) {
    if (words.size() < 2) return join(words, "");
    return join(std::vector<std::string>(words.begin(), words.end() - 1), ", ") + " or " + words.back();
}

using Parser = bool (*)(const std::string& value, HelperSettings& settings);

// Each row of settings_table.json with its parser.
std::vector<SettingSpec> load_setting_specs() {
    const std::map<std::string, Parser> parsers = {
        {"VARIANT", parse_variant},           {"OFFLINE", parse_offline},
        {"OVERRIDE_CUDA", parse_override_cuda}, {"OVERRIDE_SM", parse_override_sm},
        {"PROBE_TIMEOUT", parse_probe_timeout}, {"TIMEOUT", parse_timeout},
        {"RETRIES", parse_retries},           {"MIN_RATE", parse_min_rate},
        {"CA_BUNDLE", parse_ca_bundle},       {"CACHE_DIR", parse_cache_dir},
        {"RELEASE_URL", parse_release_url},   {"ONLY_BINARY", parse_only_binary},
        {"BUILD_ON_MISMATCH", parse_build_on_mismatch},
    };
    const nlohmann::json& table = settings_table();
    const nlohmann::json& words = table.at("switch_words");
    std::string switch_forms = table.at("switch_forms").get<std::string>();
    for (const char* state : {"on", "off"}) {
        switch_forms = replaced(switch_forms, std::string("{") + state + "}",
                                listed(words.at(state).get<std::vector<std::string>>()));
    }
    std::vector<SettingSpec> specs;
    for (const nlohmann::json& row : table.at("settings")) {
        const std::string suffix = row.at("suffix").get<std::string>();
        const auto parser = parsers.find(suffix);
        if (parser == parsers.end()) throw std::logic_error("settings_table.json: " + suffix + " has no parser in helper_settings.cpp");
        specs.push_back({suffix, row.at("type").get<std::string>(),
                         replaced(row.at("accepted").get<std::string>(), "{switch_forms}", switch_forms),
                         row.value("default", ""), row.value("unset", ""), parser->second, row.value("redacted", false)});
    }
    if (specs.size() != parsers.size()) throw std::logic_error("helper_settings.cpp parses a variable settings_table.json does not declare");
    return specs;
}

}  // namespace

std::string shown(const std::string& text, const SettingNames& names) { return replaced(text, "{caller}", names.caller()); }

std::string SettingSpec::shown_default(const SettingNames& names) const {
    return default_value.empty() ? shown(unset, names) : default_value;
}

const std::vector<SettingSpec>& setting_specs() {
    static const std::vector<SettingSpec> specs = load_setting_specs();
    return specs;
}

std::string setting_list(const SettingNames& names) {
    std::string list;
    for (const SettingSpec& spec : setting_specs()) list += (list.empty() ? "" : ", ") + names.of(spec.suffix);
    return list;
}

HelperSettings default_helper_settings(const SettingNames& names) {
    HelperSettings settings;
    settings.names = names;
    settings.probe.names = names;
    settings.fetch.names = names;
    for (const SettingSpec& spec : setting_specs()) {
        if (!spec.default_value.empty() && !spec.parse(spec.default_value, settings)) {
            throw std::logic_error("settings_table.json: " + spec.suffix + "'s default '" + spec.default_value +
                                   "' is not of its accepted form");
        }
    }
    return settings;
}

HelperSettings parse_helper_settings(const SettingNames& names, const EnvLookup& env) {
    HelperSettings settings = default_helper_settings(names);
    for (const SettingSpec& spec : setting_specs()) {
        const std::string name = names.of(spec.suffix);
        const std::optional<std::string> value = env(name);
        if (value && !spec.parse(*value, settings)) {
            throw SettingError(name, spec.redacted ? fetch::redacted_url(*value) : *value, shown(spec.accepted, names));
        }
    }
    return settings;
}

}  // namespace culina
