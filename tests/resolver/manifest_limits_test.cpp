// Hostile manifest sizes: a long property list is checked in linear time, and a --manifest file
// larger than any release manifest is refused before it is read.
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

TEST(ManifestLimits, AManifestFileOver16MiBIsRefusedUnread) {
    const std::string path = testing::TempDir() + "/huge_manifest_" + std::to_string(::getpid()) + ".json";
    {
        std::ofstream out(path);
        out << manifest_text(wheel_with_properties(0));
    }
    ::truncate(path.c_str(), (16 << 20) + 1);
    try {
        load_manifest(path);
        FAIL() << "a 16 MiB manifest must be refused";
    } catch (const ManifestError& error) {
        EXPECT_NE(std::string(error.what()).find("this is not one"), std::string::npos) << error.what();
    }
    ::unlink(path.c_str());
}

}  // namespace
}  // namespace culina
