// The helper's one settings table: every variable parses its good values into the typed
// settings and refuses a bad one with a message naming prefix + suffix, the value and the
// accepted form; a caller's prefix renames every variable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "common/setting_error.h"
#include "settings/helper_settings.h"
#include "fake_environment.h"
#include "shared_case_file.h"

namespace culina {
namespace {

using test_support::env_of;

HelperSettings parse(std::map<std::string, std::string> values, const std::string& prefix = "CULINA_") {
    return parse_helper_settings(SettingNames{prefix}, env_of(std::move(values)));
}

// Values each variable must refuse. A variable added to the table without an entry here fails
// EveryVariableRefusesABadValue.
const std::map<std::string, std::vector<std::string>> kBadValues = {
    {"VARIANT", {"cu 130", "cu130!", "cuda-13", "a-very-long-label-name"}},
    {"OFFLINE", {"2", " 1", "enable", "y"}},
    {"OVERRIDE_CUDA", {"twelve", "12.9.1.1", "cu129", "-1"}},
    {"OVERRIDE_SM", {"8.6,,9.0", "sm_90", "9", "8.6 9.0", "9.0,"}},
    {"PROBE_TIMEOUT", {"", "0", "-1", "fast", "10s", "100000"}},
    {"TIMEOUT", {"abc", "0", "-1", "1.5", " 5", "3601", "99999999999", "0x10"}},
    {"RETRIES", {"x", "21", "-1", "-2", "3 "}},
    {"MIN_RATE", {"0", "-1", "1.5", "64k", "64 KiB/s", "1048577", "9999999999", " 32"}},
    {"CA_BUNDLE", {"/nonexistent/ca.pem", "/"}},
    {"CACHE_DIR", {"relative", "./x", "~user/x"}},
    {"RELEASE_URL", {"releases", "ftp://host/x", "https://", "file://otherhost/srv"}},
    {"ONLY_BINARY", {"2", " 1", "yes ", "-1"}},
    {"BUILD_ON_MISMATCH", {"onn", "-1", "1 "}},
};

TEST(SettingsTable, DefaultsWhenNothingIsSet) {
    const HelperSettings settings = parse({});
    EXPECT_EQ(settings.variant.kind, VariantRequest::Kind::automatic);
    EXPECT_FALSE(settings.probe.override_cuda.has_value());
    EXPECT_FALSE(settings.probe.override_gpus.has_value());
    EXPECT_EQ(settings.probe.cuda_timeout.count(), 15000);
    EXPECT_EQ(settings.fetch.timeout_seconds, 30);
    EXPECT_EQ(settings.fetch.retries, 3);
    EXPECT_EQ(settings.fetch.min_rate_kib, 32);
    EXPECT_FALSE(settings.fetch.offline);
    EXPECT_FALSE(settings.fetch.cache_dir.has_value());
    EXPECT_FALSE(settings.release_url.has_value());
}

TEST(SettingsTable, ReadsGoodValues) {
    const HelperSettings settings = parse({{"CULINA_VARIANT", " CU129\n"},
                                           {"CULINA_OVERRIDE_CUDA", "13"},
                                           {"CULINA_OVERRIDE_SM", "86;90"},
                                           {"CULINA_PROBE_TIMEOUT", "0.5"},
                                           {"CULINA_TIMEOUT", "5"},
                                           {"CULINA_RETRIES", "0"},
                                           {"CULINA_MIN_RATE", "1"},
                                           {"CULINA_OFFLINE", "1"},
                                           {"CULINA_CACHE_DIR", "~/c"},
                                           {"CULINA_RELEASE_URL", "file:///srv/wheels"}});
    EXPECT_EQ(settings.variant.str(), "cu129");
    EXPECT_EQ(settings.probe.override_cuda, std::optional<CudaVersion>(CudaVersion{13, 0}));
    EXPECT_EQ(settings.probe.override_gpus, (std::vector<ComputeCapability>{{8, 6}, {9, 0}}));
    EXPECT_EQ(settings.probe.cuda_timeout.count(), 500);
    EXPECT_EQ(settings.fetch.timeout_seconds, 5);
    EXPECT_EQ(settings.fetch.retries, 0);
    EXPECT_EQ(settings.fetch.min_rate_kib, 1);
    EXPECT_TRUE(settings.fetch.offline);
    EXPECT_EQ(settings.fetch.cache_dir, "~/c");
    EXPECT_EQ(settings.release_url, "file:///srv/wheels");
    EXPECT_EQ(parse({{"CULINA_OVERRIDE_SM", "8.6,9.0"}}).probe.override_gpus,
              (std::vector<ComputeCapability>{{8, 6}, {9, 0}}));
    EXPECT_EQ(parse({{"CULINA_OVERRIDE_CUDA", "12.9"}}).probe.override_cuda,
              std::optional<CudaVersion>(CudaVersion{12, 9}));
    EXPECT_EQ(parse({{"CULINA_PROBE_TIMEOUT", "15"}}).probe.cuda_timeout.count(), 15000);
    EXPECT_EQ(parse({{"CULINA_MIN_RATE", "1048576"}}).fetch.min_rate_kib, 1048576);
}

TEST(SettingsTable, EmptyMeansNoDriverNoGpuOrTheDefault) {
    const HelperSettings settings = parse({{"CULINA_OVERRIDE_CUDA", ""},
                                           {"CULINA_OVERRIDE_SM", ""},
                                           {"CULINA_VARIANT", ""},
                                           {"CULINA_OFFLINE", ""},
                                           {"CULINA_TIMEOUT", ""},
                                           {"CULINA_MIN_RATE", ""},
                                           {"CULINA_CA_BUNDLE", ""},
                                           {"CULINA_CACHE_DIR", ""},
                                           {"CULINA_RELEASE_URL", ""}});
    ASSERT_TRUE(settings.probe.override_cuda.has_value());
    EXPECT_FALSE(settings.probe.override_cuda->has_value());
    ASSERT_TRUE(settings.probe.override_gpus.has_value());
    EXPECT_TRUE(settings.probe.override_gpus->empty());
    EXPECT_EQ(settings.variant.kind, VariantRequest::Kind::automatic);
    EXPECT_EQ(settings.fetch.timeout_seconds, 30);
    EXPECT_EQ(settings.fetch.min_rate_kib, 32);
    EXPECT_EQ(settings.fetch.ca_bundle, "");
    EXPECT_FALSE(settings.release_url.has_value());
}

TEST(SettingsTable, EveryVariableRefusesABadValue) {
    std::set<std::string> in_table;
    for (const SettingSpec& spec : setting_specs()) {
        in_table.insert(spec.suffix);
        const auto bad = kBadValues.find(spec.suffix);
        ASSERT_NE(bad, kBadValues.end()) << spec.suffix << " has no bad values in this test";
        for (const std::string& value : bad->second) {
            for (const std::string prefix : {"CULINA_", "OTHER_PROJECT_"}) {
                const std::string name = prefix + spec.suffix;
                try {
                    parse({{name, value}}, prefix);
                    ADD_FAILURE() << name << "='" << value << "' was accepted";
                } catch (const SettingError& error) {
                    const std::string message = error.what();
                    EXPECT_EQ(message.rfind(name + "='", 0), 0u) << message;
                    EXPECT_NE(message.find("accepted: " + shown(spec.accepted, SettingNames{prefix})), std::string::npos)
                        << message;
                }
            }
        }
    }
    for (const auto& [suffix, values] : kBadValues) EXPECT_TRUE(in_table.count(suffix)) << suffix << " is not in the table";
}

// Each row of settings_table.json declares its variable once: a default in the accepted form or
// what unset means, and no placeholder left once shown.
TEST(SettingsTable, EveryRowIsDeclaredOnce) {
    std::set<std::string> suffixes;
    for (const SettingSpec& spec : setting_specs()) {
        EXPECT_TRUE(suffixes.insert(spec.suffix).second) << spec.suffix << " is declared twice";
        EXPECT_NE(spec.default_value.empty(), spec.unset.empty()) << spec.suffix << ": give 'default' or 'unset'";
        EXPECT_FALSE(spec.type.empty()) << spec.suffix;
        const SettingNames names{"MY_PKG_"};
        for (const std::string& text : {shown(spec.accepted, names), spec.shown_default(names)}) {
            EXPECT_EQ(text.find('{'), std::string::npos) << spec.suffix << ": " << text;
        }
    }
    const auto cache_dir = std::find_if(setting_specs().begin(), setting_specs().end(),
                                        [](const SettingSpec& spec) { return spec.suffix == "CACHE_DIR"; });
    ASSERT_NE(cache_dir, setting_specs().end());
    EXPECT_EQ(cache_dir->shown_default(SettingNames{"MY_PKG_"}), "$XDG_CACHE_HOME/my-pkg, else ~/.cache/my-pkg");
}

// CACHE_DIR and RELEASE_URL are parsed by the adapter too, before any helper runs: both sides
// take the cases of tests/data/shared_setting_cases.json (tests/adapter/test_adapter_settings.py).
TEST(SettingsTable, SharedSettingCasesAgreeWithTheAdapter) {
    const nlohmann::json cases = read_case_file("shared_setting_cases.json").at("cases");
    ASSERT_FALSE(cases.empty());
    for (const nlohmann::json& row : cases) {
        const std::string name = "CULINA_" + row.at("suffix").get<std::string>();
        const std::string value = row.at("text").get<std::string>();
        if (row.at("accepted").get<bool>()) {
            EXPECT_NO_THROW(parse({{name, value}})) << row;
        } else {
            EXPECT_THROW(parse({{name, value}}), SettingError) << row;
        }
    }
}

// Every switch takes the spellings of tests/data/switch_setting_cases.json, as the adapter's do.
TEST(SettingsTable, SwitchSpellingsSharedWithTheAdapter) {
    const nlohmann::json cases = read_case_file("switch_setting_cases.json").at("cases");
    ASSERT_FALSE(cases.empty());
    const std::map<std::string, std::function<bool(const HelperSettings&)>> switches = {
        {"OFFLINE", [](const HelperSettings& s) { return s.fetch.offline; }},
        {"ONLY_BINARY", [](const HelperSettings& s) { return s.fallback.never; }},
        {"BUILD_ON_MISMATCH", [](const HelperSettings& s) { return s.fallback.after_mismatch; }},
    };
    for (const auto& [suffix, read] : switches) {
        const std::string name = "CULINA_" + suffix;
        for (const nlohmann::json& row : cases) {
            const std::string value = row.at("text").get<std::string>();
            if (row.value("error", false)) {
                EXPECT_THROW(parse({{name, value}}), SettingError) << name << " " << row;
            } else {
                const bool expected = row.at("on").is_null() ? read(parse({})) : row.at("on").get<bool>();
                EXPECT_EQ(read(parse({{name, value}})), expected) << name << " " << row;
            }
        }
    }
}

TEST(SettingsTable, ThePrefixDecidesWhichVariablesAreRead) {
    EXPECT_TRUE(parse({{"MYPROJ_OFFLINE", "1"}}, "MYPROJ_").fetch.offline);
    EXPECT_FALSE(parse({{"CULINA_OFFLINE", "1"}}, "MYPROJ_").fetch.offline);
    EXPECT_NO_THROW(parse({{"CULINA_TIMEOUT", "abc"}}, "MYPROJ_"));
    EXPECT_EQ(parse({}, "MYPROJ_").fetch.names.of("TIMEOUT"), "MYPROJ_TIMEOUT");
    EXPECT_EQ(parse({}, "MYPROJ_").probe.names.of("OVERRIDE_SM"), "MYPROJ_OVERRIDE_SM");
}

TEST(SettingsTable, AUrlIsShownRedacted) {
    try {
        parse({{"CULINA_RELEASE_URL", "ftp://user:secret@host/x?sig=token"}});
        FAIL() << "accepted";
    } catch (const SettingError& error) {
        EXPECT_EQ(std::string(error.what()).find("secret"), std::string::npos) << error.what();
        EXPECT_EQ(std::string(error.what()).find("token"), std::string::npos) << error.what();
    }
}

TEST(SettingsTable, EnvPrefixForm) {
    for (const char* good : {"CULINA_", "A_", "MY_PROJ2_"}) EXPECT_TRUE(is_valid_env_prefix(good)) << good;
    for (const char* bad : {"", "_", "culina_", "CULINA", "1A_", "A-B_", "A B_"}) EXPECT_FALSE(is_valid_env_prefix(bad)) << bad;
}

}  // namespace
}  // namespace culina
