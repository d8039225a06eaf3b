// The policy's inputs from outside: CULINA_VARIANT, the tags file, arch lists; and the
// coverage rules for single targets.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "policy/arch_coverage.h"
#include "policy/build_archs.h"
#include "policy/input_error.h"
#include "policy/tag_rank.h"
#include "policy/variant_request.h"
#include "shared_case_file.h"

namespace culina {
namespace {

// The cases culina's import-time check runs too (tests/data/variant_request_cases.json).
TEST(VariantRequest, ReadsTheCasesSharedWithTheImportCheck) {
    const nlohmann::json cases = read_case_file("variant_request_cases.json").at("cases");
    ASSERT_FALSE(cases.empty());
    for (const nlohmann::json& row : cases) {
        const std::optional<VariantRequest> request = parse_variant_request(row.at("text").get<std::string>());
        if (row.value("error", false)) {
            EXPECT_FALSE(request.has_value()) << row;
        } else {
            ASSERT_TRUE(request.has_value()) << row;
            EXPECT_EQ(request->str(), row.at("request").get<std::string>()) << row;
            EXPECT_EQ(request->is_cpu(), request->str() == "null") << row;
        }
    }
}

TEST(SupportedTags, ReadsOneTagPerLineBestFirst) {
    EXPECT_EQ(parse_supported_tags("cp312-cp312-manylinux_2_28_x86_64\n\n  cp312-abi3-manylinux_2_28_x86_64\r\npy3-none-any\n", "t"),
              (std::vector<std::string>{"cp312-cp312-manylinux_2_28_x86_64", "cp312-abi3-manylinux_2_28_x86_64", "py3-none-any"}));
}

TEST(SupportedTags, MalformedLineOrEmptyFileIsAnError) {
    try {
        parse_supported_tags("cp312-cp312-linux_x86_64\ncp312 cp312\n", "tags.txt");
        FAIL() << "expected PolicyInputError";
    } catch (const PolicyInputError& error) {
        EXPECT_NE(std::string(error.what()).find("tags.txt, line 2: 'cp312 cp312'"), std::string::npos) << error.what();
    }
    EXPECT_THROW(parse_supported_tags("\n \n", "tags.txt"), PolicyInputError);
    // A compressed tag stands for several; the interpreter's list names them one by one.
    EXPECT_THROW(parse_supported_tags("py2.py3-none-any\n", "tags.txt"), PolicyInputError);
}

TEST(SupportedTags, RanksCompressedWheelTags) {
    WheelEntry wheel;
    wheel.tags = {"cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64"};
    const std::vector<std::string> supported = {"cp312-cp312-manylinux_2_28_x86_64", "cp312-cp312-manylinux2014_x86_64",
                                                "cp312-cp312-manylinux_2_17_x86_64"};
    EXPECT_EQ(tag_rank(wheel, supported), 1u);
    EXPECT_FALSE(tag_rank(wheel, {"cp311-cp311-manylinux_2_17_x86_64"}).has_value());
}

TEST(ArchList, ParsesDottedCompactSuffixedAndPtx) {
    EXPECT_EQ(parse_arch_list(kDefaultLocalBuildArchs, "x"), (std::vector<std::string>{"7.5", "8.0", "9.0", "10.0", "12.0+PTX"}));
    EXPECT_EQ(parse_arch_list("80; 90a;120f+PTX", "x"), (std::vector<std::string>{"8.0", "9.0a", "12.0f+PTX"}));
}

TEST(ArchList, MalformedItemIsAnErrorNamingIt) {
    try {
        parse_arch_list("8.0;sm90", "--default-archs");
        FAIL() << "expected PolicyInputError";
    } catch (const PolicyInputError& error) {
        EXPECT_NE(std::string(error.what()).find("--default-archs='8.0;sm90': 'sm90' is not an architecture"), std::string::npos)
            << error.what();
    }
    EXPECT_THROW(parse_arch_list("", "x"), PolicyInputError);
    EXPECT_THROW(parse_arch_list(" ; ", "x"), PolicyInputError);
}

TEST(ArchList, ToolkitFilterMovesPtxToTheNewestKept) {
    std::vector<std::string> dropped;
    EXPECT_EQ(archs_buildable_by(parse_arch_list(kDefaultLocalBuildArchs, "x"), CudaVersion{12, 4}, dropped),
              (std::vector<std::string>{"7.5", "8.0", "9.0+PTX"}));
    ASSERT_EQ(dropped.size(), 2u);
    EXPECT_NE(dropped[0].find("10.0 (CUDA 12.4 cannot target 10.0"), std::string::npos) << dropped[0];
    dropped.clear();
    EXPECT_EQ(archs_buildable_by({"7.0", "8.0"}, CudaVersion{13, 0}, dropped), (std::vector<std::string>{"8.0"}));
}

struct CoverageCase {
    const char* arch;
    const char* gpu;
    bool runs;
};

const CoverageCase kCoverage[] = {
    {"sm_80", "8.0", true},    {"sm_80", "8.6", true},     {"sm_80", "8.9", true},      {"sm_86", "8.0", false},
    {"sm_80", "9.0", false},   {"sm_90", "10.0", false},   {"sm_120", "12.1", true},    {"sm_90a", "9.0", true},
    {"sm_90a", "10.0", false}, {"sm_100a", "10.3", false}, {"sm_100f", "10.3", true},   {"sm_103f", "10.0", false},
    {"sm_120f", "12.1", true}, {"sm_120f", "10.0", false}, {"compute_80", "12.0", true}, {"compute_90", "8.9", false},
    {"compute_90a", "9.0", true}, {"compute_90a", "10.0", false}, {"compute_120f", "12.1", true},
};

TEST(ArchCoverage, FollowsTheDesignRules) {
    for (const CoverageCase& row : kCoverage) {
        EXPECT_EQ(arch_runs_on(parse_cuda_arch(row.arch).value(), parse_compute_capability(row.gpu).value()), row.runs)
            << row.arch << " on " << row.gpu;
    }
}

TEST(ArchCoverage, SassNeedsDriverOfBuildMajorPtxNeedsBuildVersion) {
    WheelTargets targets;
    targets.build = {12, 9};
    targets.sass = {parse_cuda_arch("sm_90").value()};
    targets.ptx = {parse_cuda_arch("compute_90").value()};
    EXPECT_TRUE(cover_gpu(targets, {9, 0}, {12, 0}).covered);    // minor-version compatibility
    EXPECT_FALSE(cover_gpu(targets, {9, 0}, {11, 8}).covered);
    EXPECT_FALSE(cover_gpu(targets, {10, 0}, {12, 8}).covered);  // PTX from 12.9 on a 12.8 driver
    const GpuCoverage ptx = cover_gpu(targets, {10, 0}, {12, 9});
    EXPECT_TRUE(ptx.covered);
    EXPECT_TRUE(ptx.via_ptx);
    EXPECT_EQ(targets.str(), "sm_90 + compute_90");
}

}  // namespace
}  // namespace culina
