// Hostile manifest sizes: a long property list is checked in linear time, a --manifest file
// larger than any release manifest is refused before it is read (or as soon as reading passes
// the cap), and nesting deeper than the schema's is refused as the parser reaches it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "manifest/manifest.h"

namespace culina {
namespace {

nlohmann::json wheel_with_properties(int extra) {
    nlohmann::json properties = {"nvidia :: cuda_version_lower_bound :: 13.0", "nvidia :: sm_arch :: 90_real"};
    for (int i = 0; i < extra; ++i) properties.push_back("other :: feature :: v" + std::to_string(i));
    return {{"file", "culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl"},
            {"sha256", std::string(64, '0')},
            {"size", 10},
            {"tags", {"cp312-cp312-manylinux_2_28_x86_64"}},
            {"variant", "cu130"},
            {"cuda", "13.0"},
            {"sass", {"sm_90"}},
            {"ptx", nlohmann::json::array()},
            {"variant_properties", properties}};
}

std::string manifest_text(const nlohmann::json& wheel) {
    return nlohmann::json{{"schema_version", 1}, {"name", "culina"}, {"version", "0.1.0"}, {"wheels", {wheel}}}.dump();
}

TEST(ManifestLimits, AHundredThousandPropertiesParseInLinearTime) {
    const std::string text = manifest_text(wheel_with_properties(100000));
    const auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(parse_manifest(text).wheels.at(0).variant_properties.size(), 100002u);
    // Quadratic duplicate checks took over 20 s here; linear ones take well under a second.
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(3));
}

TEST(ManifestLimits, ADuplicateInALongListIsStillFound) {
    nlohmann::json wheel = wheel_with_properties(1000);
    wheel["variant_properties"].push_back("other :: feature :: v500");
    EXPECT_THROW(parse_manifest(manifest_text(wheel)), ManifestError);
}

std::string temporary_manifest(const std::string& name, const std::string& text) {
    const std::string path = testing::TempDir() + "/" + name + "_" + std::to_string(::getpid()) + ".json";
    std::ofstream(path) << text;
    return path;
}

std::string load_error(const std::string& path) {
    try {
        load_manifest(path);
    } catch (const ManifestError& error) {
        return error.what();
    }
    return "";
}

TEST(ManifestLimits, AManifestFileOver1MiBIsRefusedUnread) {
    const std::string path = temporary_manifest("huge_manifest", manifest_text(wheel_with_properties(0)));
    ::truncate(path.c_str(), kManifestSizeLimit + 1);
    const std::string message = load_error(path);
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find("larger than 1048576 bytes, the most a release manifest may be"), std::string::npos) << message;
    EXPECT_NE(message.find("use a release's release-manifest.json"), std::string::npos) << message;
    ::unlink(path.c_str());
}

TEST(ManifestLimits, AManifestOfExactlyTheCapIsRead) {
    std::string text = manifest_text(wheel_with_properties(0));
    text.append(kManifestSizeLimit - text.size(), ' ');
    const std::string path = temporary_manifest("cap_manifest", text);
    EXPECT_EQ(load_manifest(path).wheels.size(), 1u);
    ::unlink(path.c_str());
}

TEST(ManifestLimits, AnEndlessSourceIsReadOnlyUpToTheCap) {
    // A device of size 0 that never ends: read until the cap, then refused.
    const std::string message = load_error("/dev/zero");
    EXPECT_NE(message.find("/dev/zero"), std::string::npos) << message;
    EXPECT_NE(message.find("larger than 1048576 bytes"), std::string::npos) << message;
}

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string depth_error(const std::string& text) {
    try {
        parse_manifest(text);
    } catch (const ManifestError& error) {
        return error.what();
    }
    return "";
}

TEST(ManifestLimits, NestingUpToTheLimitIsParsedDeeperIsRefused) {
    // The document is level 1; a field holding 15 nested arrays reaches level 16, the limit.
    const std::string prefix = R"({"schema_version":1,"name":"culina","version":"0.1.0","wheels":[],"extra":)";
    const std::string within = depth_error(prefix + nested(kManifestDepthLimit - 1) + "}");
    EXPECT_NE(within.find("extra: unknown field"), std::string::npos) << within;
    const std::string beyond = depth_error(prefix + nested(kManifestDepthLimit) + "}");
    EXPECT_NE(beyond.find("nested more than 16 levels deep (the schema needs 4)"), std::string::npos) << beyond;
    EXPECT_NE(beyond.find("this is not a release manifest"), std::string::npos) << beyond;
}

TEST(ManifestLimits, DeepNestingIsRefusedAtTheLimitNotAtTheEnd) {
    // Unclosed: a parser that read to the end would report a syntax error instead.
    for (const char* open : {"[", "{\"a\":"}) {
        std::string text;
        for (int i = 0; i < 100000; ++i) text += open;
        const std::string message = depth_error(text);
        EXPECT_NE(message.find("nested more than 16 levels deep"), std::string::npos) << message.substr(0, 200);
    }
}

TEST(ManifestLimits, AFileOfNestedArraysNamesThePathAndTheLimit) {
    const std::string path = temporary_manifest("nested_manifest", std::string(100 * 1024, '['));
    const std::string message = load_error(path);
    EXPECT_NE(message.find("release manifest " + path + ": arrays and objects are nested more than 16"), std::string::npos)
        << message;
    ::unlink(path.c_str());
}

}  // namespace
}  // namespace culina
