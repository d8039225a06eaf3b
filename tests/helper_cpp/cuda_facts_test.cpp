// The embedded CUDA facts against the shared case files that pytest runs on the Python side
// (tests/resolve/test_cuda_facts.py): driver minimums, label validity, what a toolkit can
// target, and the architecture-list syntax.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "facts/cuda_facts.h"
#include "manifest/cuda_arch.h"
#include "manifest/wheel_filename.h"
#include "policy/arch_coverage.h"
#include "policy/build_archs.h"
#include "policy/driver_compat.h"
#include "policy/input_error.h"
#include "shared_case_file.h"

namespace culina {
namespace {

// The cases of a section that names C++ among its languages.
nlohmann::json section(const std::string& name) {
    const nlohmann::json found = read_case_file("cuda_facts_cases.json").at(name);
    const auto languages = found.at("languages").get<std::vector<std::string>>();
    EXPECT_NE(std::find(languages.begin(), languages.end(), "c++"), languages.end()) << name;
    EXPECT_FALSE(found.at("cases").empty()) << name;
    return found.at("cases");
}

TEST(CudaFacts, TheEmbeddedFileIsTheRepositorysFile) {
    std::ifstream in(std::string(CULINA_TEST_DATA_DIR) + "/../../resolver/src/facts/cuda_facts.json");
    std::stringstream text;
    text << in.rdbuf();
    const CudaFacts& embedded = cuda_facts();
    const CudaFacts on_disk = parse_cuda_facts(text.str());
    EXPECT_EQ(embedded.driver_minimum_linux, on_disk.driver_minimum_linux);
    EXPECT_EQ(embedded.arch_introduced_in, on_disk.arch_introduced_in);
    EXPECT_EQ(embedded.toolkits_to_suggest, on_disk.toolkits_to_suggest);
    EXPECT_EQ(embedded.pypi_nvcc_first_major, on_disk.pypi_nvcc_first_major);
    EXPECT_EQ(embedded.variant_label.characters, on_disk.variant_label.characters);
}

TEST(CudaFacts, DriverMinimums) {
    for (const nlohmann::json& row : section("driver_minimum_linux")) {
        const std::optional<std::string> minimum = minimum_linux_driver_for(row.at("cuda_major").get<int>());
        if (row.at("minimum").is_null()) {
            EXPECT_FALSE(minimum.has_value()) << row;
        } else {
            EXPECT_EQ(minimum, row.at("minimum").get<std::string>()) << row;
        }
    }
}

// The coverage rule culina's import-time check applies too (tests/resolve/test_cuda_facts.py).
TEST(CudaFacts, ArchCoverageRuleSharedWithThePayload) {
    for (const nlohmann::json& row : section("arch_runs_on")) {
        std::string name = row.at("arch").get<std::string>();
        name.erase(std::remove(name.begin(), name.end(), '.'), name.end());
        const std::optional<CudaArch> arch = parse_cuda_arch((row.at("ptx").get<bool>() ? "compute_" : "sm_") + name);
        const std::optional<ComputeCapability> gpu = parse_compute_capability(row.at("gpu").get<std::string>());
        ASSERT_TRUE(arch && gpu) << row;
        EXPECT_EQ(arch_runs_on(*arch, *gpu), row.at("runs").get<bool>()) << row;
    }
}

TEST(CudaFacts, VariantLabelValidity) {
    for (const nlohmann::json& row : section("variant_label_valid")) {
        EXPECT_EQ(is_valid_variant_label(row.at("label").get<std::string>()), row.at("valid").get<bool>()) << row;
    }
}

TEST(CudaFacts, WhichMajorsHaveNvccOnPypi) {
    for (const nlohmann::json& row : section("pypi_nvcc")) {
        EXPECT_EQ(row.at("cuda_major").get<int>() >= cuda_facts().pypi_nvcc_first_major, row.at("nvcc_on_pypi").get<bool>())
            << row;
    }
}

TEST(CudaFacts, WhatAToolkitCanTarget) {
    for (const nlohmann::json& row : section("toolkit_targets")) {
        const std::optional<CudaVersion> cuda = parse_cuda_version(row.at("cuda").get<std::string>());
        const std::optional<CudaArch> arch = parse_cuda_arch(row.at("arch").get<std::string>());
        ASSERT_TRUE(cuda && arch) << row;
        EXPECT_EQ(!toolkit_arch_problem(*cuda, *arch).has_value(), row.at("buildable").get<bool>()) << row;
    }
}

TEST(CudaFacts, ArchListSyntaxSharedWithTheAdapter) {
    const nlohmann::json cases = read_case_file("arch_list_cases.json").at("cases");
    ASSERT_FALSE(cases.empty());
    for (const nlohmann::json& row : cases) {
        const std::string text = row.at("text").get<std::string>();
        if (row.value("error", false)) {
            EXPECT_THROW(parse_arch_list(text, "--default-archs"), PolicyInputError) << row;
        } else {
            EXPECT_EQ(parse_arch_list(text, "--default-archs"), row.at("archs").get<std::vector<std::string>>()) << row;
        }
    }
}

TEST(CudaFacts, AMalformedFactsFileNamesTheKey) {
    try {
        parse_cuda_facts(R"({"driver_minimum_linux": {"twelve": "525"}})");
        FAIL() << "accepted";
    } catch (const std::invalid_argument& error) {
        EXPECT_NE(std::string(error.what()).find("twelve"), std::string::npos) << error.what();
    }
}

}  // namespace
}  // namespace culina
