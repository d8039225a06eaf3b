#include <gtest/gtest.h>

#include <map>

#include "common/setting_error.h"
#include "fetch/fetch_error.h"
#include "fetch/fetch_settings.h"
#include "settings/helper_settings.h"
#include "fake_environment.h"

namespace culina::fetch {
namespace {

using test_support::env_of;

FetchSettings parse_fetch_settings(const EnvLookup& env) {
    return with_host_ca_bundle(parse_helper_settings(SettingNames{}, env).fetch, env);
}

std::string error_of(const std::map<std::string, std::string>& values) {
    try {
        parse_fetch_settings(env_of(values));
    } catch (const SettingError& error) {
        return error.what();
    } catch (const FetchError& error) {
        EXPECT_EQ(error.kind, FetchError::Kind::configuration);
        return error.what();
    }
    return "";
}

std::string cache_root_of(const std::map<std::string, std::string>& values) {
    const EnvLookup env = env_of(values);
    return resolve_cache_root(parse_helper_settings(SettingNames{}, env).fetch.cache_dir, SettingNames{}, env);
}

TEST(FetchSettings, Defaults) {
    const FetchSettings settings = parse_fetch_settings(env_of({{"HOME", "/home/u"}}));
    EXPECT_EQ(settings.timeout_seconds, 30);
    EXPECT_EQ(settings.retries, 3);
    EXPECT_FALSE(settings.offline);
    EXPECT_EQ(settings.ca_bundle, "");
    EXPECT_EQ(cache_root_of({{"HOME", "/home/u"}}), "/home/u/.cache/culina");
}

TEST(FetchSettings, TheDefaultCacheFolderIsTheCallersName) {
    const EnvLookup env = env_of({{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "/xdg"}});
    EXPECT_EQ(resolve_cache_root(std::nullopt, SettingNames{"MY_PKG_"}, env), "/xdg/my-pkg");
    EXPECT_EQ(resolve_cache_root(std::nullopt, SettingNames{"TINYCU_"}, env_of({{"HOME", "/home/u"}})),
              "/home/u/.cache/tinycu");
}

TEST(FetchSettings, ReadsValues) {
    const FetchSettings settings = parse_fetch_settings(
        env_of({{"HOME", "/h"}, {"CULINA_TIMEOUT", "5"}, {"CULINA_RETRIES", "0"}, {"CULINA_OFFLINE", "1"}}));
    EXPECT_EQ(settings.timeout_seconds, 5);
    EXPECT_EQ(settings.retries, 0);
    EXPECT_TRUE(settings.offline);
}

TEST(FetchSettings, EmptyValueMeansDefaultAndSaysSo) {
    const FetchSettings settings = parse_fetch_settings(env_of({{"HOME", "/h"}, {"CULINA_TIMEOUT", ""}}));
    EXPECT_EQ(settings.timeout_seconds, 30);
    ASSERT_FALSE(settings.notes.empty());
    EXPECT_NE(settings.notes.front().find("CULINA_TIMEOUT is set but empty"), std::string::npos);
}

TEST(FetchSettings, MalformedValuesNameVariableValueAndForm) {
    for (const char* bad : {"abc", "0", "-1", "1.5", " 5", "3601", "99999999999"}) {
        const std::string message = error_of({{"HOME", "/h"}, {"CULINA_TIMEOUT", bad}});
        EXPECT_NE(message.find(std::string("CULINA_TIMEOUT='") + bad + "'"), std::string::npos) << message;
        EXPECT_NE(message.find("whole number from 1 to 3600"), std::string::npos) << message;
    }
    for (const char* bad : {"x", "21", "-1", "3 "}) {
        const std::string message = error_of({{"HOME", "/h"}, {"CULINA_RETRIES", bad}});
        EXPECT_NE(message.find(std::string("CULINA_RETRIES='") + bad + "'"), std::string::npos) << message;
        EXPECT_NE(message.find("whole number from 0 to 20"), std::string::npos) << message;
    }
    EXPECT_NE(error_of({{"HOME", "/h"}, {"CULINA_OFFLINE", "enabled"}}).find("CULINA_OFFLINE='enabled'"), std::string::npos);
}

TEST(FetchSettings, CacheRootOrder) {
    EXPECT_EQ(cache_root_of({{"CULINA_CACHE_DIR", "/c"}, {"XDG_CACHE_HOME", "/x"}, {"HOME", "/h"}}), "/c");
    EXPECT_EQ(cache_root_of({{"XDG_CACHE_HOME", "/x"}, {"HOME", "/h"}}), "/x/culina");
    // XDG requires an absolute path; a relative one is ignored as the spec says.
    EXPECT_EQ(cache_root_of({{"XDG_CACHE_HOME", "rel"}, {"HOME", "/h"}}), "/h/.cache/culina");
    EXPECT_EQ(cache_root_of({{"CULINA_CACHE_DIR", "~/c/../d/"}, {"HOME", "/h"}}), "/h/d");
    EXPECT_THROW(cache_root_of({}), FetchError);
    EXPECT_THROW(cache_root_of({{"CULINA_CACHE_DIR", "~/c"}}), FetchError);
    // The form is the setting's, checked up front; HOME is a host fact, checked where a cache is used.
    EXPECT_THROW(cache_root_of({{"CULINA_CACHE_DIR", "rel"}, {"HOME", "/h"}}), SettingError);
}

TEST(FetchSettings, CaBundleFromTheFirstVariableSet) {
    const std::string existing = testing::TempDir();
    const std::string file = existing + "/culina_ca.pem";
    FILE* pem = std::fopen(file.c_str(), "w");
    ASSERT_NE(pem, nullptr);
    std::fclose(pem);
    const FetchSettings settings = parse_fetch_settings(
        env_of({{"HOME", "/h"}, {"SSL_CERT_FILE", file}, {"CURL_CA_BUNDLE", "/nonexistent"}}));
    EXPECT_EQ(settings.ca_bundle, file);
    EXPECT_EQ(settings.ca_bundle_source, "SSL_CERT_FILE");
    const std::string message = error_of({{"HOME", "/h"}, {"CULINA_CA_BUNDLE", "/nonexistent/ca.pem"}});
    EXPECT_NE(message.find("CULINA_CA_BUNDLE='/nonexistent/ca.pem'"), std::string::npos) << message;
    EXPECT_NE(error_of({{"HOME", "/h"}, {"CULINA_CA_BUNDLE", existing}}).find("readable PEM file"), std::string::npos);
    std::remove(file.c_str());
}

}  // namespace
}  // namespace culina::fetch
