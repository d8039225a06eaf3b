#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "manifest/manifest.h"

namespace culina {
namespace {

using nlohmann::json;

const std::string kFixtures = std::string(CULINA_TEST_DATA_DIR) + "/manifests/";

json valid_document() {
    return json::parse(read_text_file(kFixtures + "release-0.1.0.json").value());
}

TEST(Manifest, ParsesTheReleaseFixture) {
    const Manifest manifest = load_manifest(kFixtures + "release-0.1.0.json");
    EXPECT_EQ(manifest.schema_version, 1);
    EXPECT_EQ(manifest.name, "culina");
    EXPECT_EQ(manifest.version, "0.1.0");
    ASSERT_EQ(manifest.wheels.size(), 6u);
    const WheelEntry& cu130 = manifest.wheels[0];
    EXPECT_EQ(cu130.file, "culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl");
    EXPECT_EQ(cu130.sha256.size(), 64u);
    EXPECT_EQ(cu130.size, 48000000u);
    EXPECT_EQ(cu130.variant, "cu130");
    EXPECT_EQ(cu130.cuda, (CudaVersion{13, 0}));
    EXPECT_EQ(cu130.sass, (std::vector<std::string>{"sm_75", "sm_80", "sm_90", "sm_100", "sm_120"}));
    EXPECT_EQ(cu130.ptx, (std::vector<std::string>{"compute_120"}));
    EXPECT_EQ(cu130.variant_properties.front(), "nvidia :: cuda_version_lower_bound :: 13.0");
    const WheelEntry& cpu = manifest.wheels[2];
    EXPECT_TRUE(cpu.cpu_only());
    EXPECT_TRUE(cpu.sass.empty());
    EXPECT_EQ(manifest.variant_labels(), (std::vector<std::string>{"cu130", "cu129", "null"}));
}

TEST(Manifest, ParsesCompressedTagsAndSuffixedTargets) {
    const Manifest manifest = load_manifest(kFixtures + "compressed-tags.json");
    ASSERT_EQ(manifest.wheels.size(), 1u);
    EXPECT_EQ(manifest.wheels[0].tags.front(), "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64");
    EXPECT_EQ(manifest.wheels[0].sass, (std::vector<std::string>{"sm_80", "sm_90a", "sm_100f", "sm_120f"}));
}

TEST(Manifest, AcceptsAReleaseWithoutWheels) {
    EXPECT_TRUE(load_manifest(kFixtures + "empty-release.json").wheels.empty());
}

TEST(Manifest, KeepsPropertiesOfOtherNamespaces) {
    json document = valid_document();
    document["wheels"][0]["variant_properties"].push_back("x86_64 :: level :: v3");
    EXPECT_EQ(parse_manifest(document.dump()).wheels[0].variant_properties.back(), "x86_64 :: level :: v3");
}

TEST(Manifest, UnreadableFileNamesThePath) {
    try {
        load_manifest(kFixtures + "no-such-manifest.json");
        FAIL() << "expected ManifestError";
    } catch (const ManifestError& error) {
        EXPECT_NE(std::string(error.what()).find("no-such-manifest.json"), std::string::npos) << error.what();
    }
}

TEST(Manifest, ErrorFromAFileNamesThePathAndTheField) {
    json document = valid_document();
    document["wheels"][1]["size"] = -1;
    const std::string path = testing::TempDir() + "manifest_test_negative_size.json";
    std::ofstream(path) << document.dump();
    try {
        load_manifest(path);
        FAIL() << "expected ManifestError";
    } catch (const ManifestError& error) {
        EXPECT_EQ(error.field, "wheels[1].size");
        EXPECT_EQ(std::string(error.what()),
                  "release manifest " + path + ": wheels[1].size: -1 is negative; expected the file size in bytes");
    }
}

struct BadManifestCase {
    const char* name;
    std::function<void(json&)> break_it;
    const char* field;    // expected ManifestError::field
    const char* message;  // expected part of what()
};

// Each case breaks one thing in a valid manifest; the error must name that field.
const BadManifestCase kBadManifests[] = {
    {"schema_version_2", [](json& d) { d["schema_version"] = 2; }, "schema_version", "2 is not supported"},
    {"schema_version_string", [](json& d) { d["schema_version"] = "1"; }, "schema_version", "is not supported"},
    {"schema_version_missing", [](json& d) { d.erase("schema_version"); }, "schema_version", "missing"},
    {"name_missing", [](json& d) { d.erase("name"); }, "name", "missing"},
    {"name_empty", [](json& d) { d["name"] = ""; }, "name", "is empty"},
    {"name_not_a_project", [](json& d) { d["name"] = "cu lina"; }, "name", "is not a project name"},
    {"version_number", [](json& d) { d["version"] = 1; }, "version", "expected a string"},
    {"wheels_object", [](json& d) { d["wheels"] = json::object(); }, "wheels", "expected an array"},
    {"wheel_not_object", [](json& d) { d["wheels"][1] = "x.whl"; }, "wheels[1]", "expected an object"},
    {"unknown_top_field", [](json& d) { d["wheelz"] = json::array(); }, "wheelz", "unknown field"},
    {"unknown_wheel_field", [](json& d) { d["wheels"][0]["sha265"] = "x"; }, "wheels[0].sha265", "unknown field"},
    {"sha256_missing", [](json& d) { d["wheels"][0].erase("sha256"); }, "wheels[0].sha256", "missing"},
    {"sha256_short", [](json& d) { d["wheels"][0]["sha256"] = "abc123"; }, "wheels[0].sha256", "not 64 lowercase hex"},
    {"sha256_upper", [](json& d) { d["wheels"][0]["sha256"] = std::string(64, 'A'); }, "wheels[0].sha256", "not 64 lowercase hex"},
    {"sha256_not_hex", [](json& d) { d["wheels"][0]["sha256"] = std::string(64, 'g'); }, "wheels[0].sha256", "not 64 lowercase hex"},
    {"size_negative", [](json& d) { d["wheels"][2]["size"] = -5; }, "wheels[2].size", "-5 is negative"},
    {"size_zero", [](json& d) { d["wheels"][2]["size"] = 0; }, "wheels[2].size", "cannot be empty"},
    {"size_fraction", [](json& d) { d["wheels"][2]["size"] = 1.5; }, "wheels[2].size", "whole number"},
    {"size_string", [](json& d) { d["wheels"][2]["size"] = "12"; }, "wheels[2].size", "whole number"},
    {"file_missing", [](json& d) { d["wheels"][0].erase("file"); }, "wheels[0].file", "missing"},
    {"file_sdist", [](json& d) { d["wheels"][0]["file"] = "culina-0.1.0.tar.gz"; }, "wheels[0].file", "is not a wheel file name"},
    {"file_other_project",
     [](json& d) { d["wheels"][0]["file"] = "torch-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl"; }, "wheels[0].file",
     "a wheel of 'torch', not of this project 'culina'"},
    {"file_other_version",
     [](json& d) { d["wheels"][0]["file"] = "culina-0.2.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl"; }, "wheels[0].file",
     "is version 0.2.0, but the manifest is for 0.1.0"},
    {"file_with_path",
     [](json& d) { d["wheels"][0]["file"] = "../culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl"; }, "wheels[0].file",
     "is not a wheel file name"},
    {"file_without_label", [](json& d) { d["wheels"][0]["file"] = "culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl"; },
     "wheels[0].file", "is not a wheel file name"},
    {"file_listed_twice", [](json& d) { d["wheels"][3] = d["wheels"][0]; }, "wheels[3].file", "listed twice"},
    {"tags_missing", [](json& d) { d["wheels"][0].erase("tags"); }, "wheels[0].tags", "missing"},
    {"tags_empty", [](json& d) { d["wheels"][0]["tags"] = json::array(); }, "wheels[0].tags", "is empty"},
    {"tag_malformed", [](json& d) { d["wheels"][0]["tags"][0] = "cp312_manylinux"; }, "wheels[0].tags[0]", "is not a wheel tag"},
    {"tags_differ_from_file_name", [](json& d) { d["wheels"][0]["tags"][0] = "cp311-cp311-manylinux_2_28_x86_64"; },
     "wheels[0].tags", "does not match the tag in the file name"},
    {"variant_differs_from_file_name", [](json& d) { d["wheels"][0]["variant"] = "cu129"; }, "wheels[0].variant",
     "differs from the label in the file name"},
    {"variant_bad_label", [](json& d) { d["wheels"][0]["variant"] = "CU130"; }, "wheels[0].variant", "is not a label"},
    {"cuda_missing", [](json& d) { d["wheels"][0].erase("cuda"); }, "wheels[0].cuda", "missing"},
    {"cuda_null_for_cuda_variant", [](json& d) { d["wheels"][0]["cuda"] = nullptr; }, "wheels[0].cuda", "is not a CUDA version"},
    {"cuda_malformed", [](json& d) { d["wheels"][0]["cuda"] = "thirteen"; }, "wheels[0].cuda", "is not a CUDA version"},
    {"cuda_for_cpu_variant", [](json& d) { d["wheels"][2]["cuda"] = "13.0"; }, "wheels[2].cuda", "must have \"cuda\": null"},
    {"sass_malformed", [](json& d) { d["wheels"][0]["sass"][0] = "sm75"; }, "wheels[0].sass[0]", "is not a target like sm_90"},
    {"ptx_in_sass_list", [](json& d) { d["wheels"][0]["sass"][0] = "compute_75"; }, "wheels[0].sass[0]", "is not a target"},
    {"sass_in_ptx_list", [](json& d) { d["wheels"][0]["ptx"][0] = "sm_120"; }, "wheels[0].ptx[0]", "is not a target like compute_120"},
    {"sass_listed_twice", [](json& d) { d["wheels"][0]["sass"][1] = "sm_75"; }, "wheels[0].sass[1]", "listed twice"},
    {"sass_too_old_for_cuda_13", [](json& d) { d["wheels"][0]["sass"][0] = "sm_70"; }, "wheels[0].sass[0]",
     "CUDA 13.0 targets sm_75 and newer only"},
    {"sass_too_new_for_cuda", [](json& d) { d["wheels"][1]["cuda"] = "12.4"; }, "wheels[1].sass[4]", "that needs CUDA >= 12.8"},
    {"arch_specific_on_old_arch", [](json& d) { d["wheels"][0]["sass"][1] = "sm_80a"; }, "wheels[0].sass[1]",
     "arch-specific targets"},
    {"sass_in_cpu_variant", [](json& d) { d["wheels"][2]["sass"] = {"sm_90"}; }, "wheels[2].sass[0]", "CPU-only variant"},
    {"cuda_variant_without_code",
     [](json& d) {
         d["wheels"][0]["sass"] = json::array();
         d["wheels"][0]["ptx"] = json::array();
     },
     "wheels[0].sass", "at least one sass or ptx target"},
    {"property_missing", [](json& d) { d["wheels"][0]["variant_properties"].erase(1); }, "wheels[0].variant_properties",
     "missing 'nvidia :: sm_arch :: 75_real'"},
    {"property_extra", [](json& d) { d["wheels"][0]["variant_properties"].push_back("nvidia :: sm_arch :: 86_real"); },
     "wheels[0].variant_properties", "'nvidia :: sm_arch :: 86_real' does not match"},
    {"property_wrong_cuda",
     [](json& d) { d["wheels"][0]["variant_properties"][0] = "nvidia :: cuda_version_lower_bound :: 12.9"; },
     "wheels[0].variant_properties", "missing 'nvidia :: cuda_version_lower_bound :: 13.0'"},
    {"property_malformed", [](json& d) { d["wheels"][0]["variant_properties"][0] = "nvidia::sm_arch::90_real"; },
     "wheels[0].variant_properties[0]", "is not a property"},
    {"properties_not_strings", [](json& d) { d["wheels"][0]["variant_properties"][0] = 90; }, "wheels[0].variant_properties[0]",
     "expected a string"},
};

// Test names carry the case; print only the name instead of the bytes.
void PrintTo(const BadManifestCase& row, std::ostream* out) { *out << row.name; }

class BadManifest : public testing::TestWithParam<BadManifestCase> {};

TEST_P(BadManifest, IsAnErrorNamingTheField) {
    json document = valid_document();
    GetParam().break_it(document);
    try {
        parse_manifest(document.dump());
        FAIL() << "expected ManifestError";
    } catch (const ManifestError& error) {
        EXPECT_EQ(error.field, GetParam().field) << error.what();
        EXPECT_NE(std::string(error.what()).find(GetParam().message), std::string::npos) << error.what();
        EXPECT_NE(std::string(error.what()).find(GetParam().field), std::string::npos) << error.what();
    }
}

INSTANTIATE_TEST_SUITE_P(Manifest, BadManifest, testing::ValuesIn(kBadManifests),
                         [](const testing::TestParamInfo<BadManifestCase>& info) { return std::string(info.param.name); });

TEST(Manifest, NotJsonIsAnErrorNotACrash) {
    for (const char* text : {"", "{", "[1,2]", "null", "{\"schema_version\": 1,}", "\xff\xfe", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}) {
        EXPECT_THROW(parse_manifest(text), ManifestError) << text;
    }
}

TEST(Manifest, DuplicateKeyIsAnError) {
    std::string text = valid_document().dump();
    text.replace(text.find("\"sha256\":"), 0, "\"sha256\":\"" + std::string(64, 'b') + "\",");
    try {
        parse_manifest(text);
        FAIL() << "expected ManifestError";
    } catch (const ManifestError& error) {
        EXPECT_EQ(error.field, "sha256");
        EXPECT_NE(std::string(error.what()).find("appears twice"), std::string::npos) << error.what();
    }
}

TEST(Manifest, DeepNestingIsAnErrorNotACrash) {
    const std::string deep = "{\"schema_version\":1,\"name\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
    EXPECT_THROW(parse_manifest(deep), ManifestError);
}

}  // namespace
}  // namespace culina
