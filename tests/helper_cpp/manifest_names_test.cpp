#include <gtest/gtest.h>

#include "common/text.h"
#include "manifest/cuda_arch.h"
#include "manifest/variant_properties.h"
#include "manifest/wheel_filename.h"

namespace culina {
namespace {

TEST(CudaArch, ParsesSassPtxAndSuffixes) {
    const std::optional<CudaArch> sm90a = parse_cuda_arch("sm_90a");
    ASSERT_TRUE(sm90a);
    EXPECT_EQ(sm90a->kind, CudaArch::Kind::sass);
    EXPECT_EQ(sm90a->cc, (ComputeCapability{9, 0}));
    EXPECT_EQ(sm90a->suffix, CudaArch::Suffix::arch_specific);
    EXPECT_EQ(sm90a->str(), "sm_90a");

    const std::optional<CudaArch> sm120f = parse_cuda_arch("sm_120f");
    ASSERT_TRUE(sm120f);
    EXPECT_EQ(sm120f->cc, (ComputeCapability{12, 0}));
    EXPECT_EQ(sm120f->suffix, CudaArch::Suffix::family);

    const std::optional<CudaArch> compute120 = parse_cuda_arch("compute_120");
    ASSERT_TRUE(compute120);
    EXPECT_EQ(compute120->kind, CudaArch::Kind::ptx);
    EXPECT_EQ(compute120->compact(), "120");
    EXPECT_EQ(compute120->str(), "compute_120");
}

TEST(CudaArch, RejectsMalformed) {
    for (const char* bad : {"", "sm_", "sm_9", "sm_9.0", "sm90", "sm_1000", "sm_90b", "sm_90af", "compute_", "lto_90", "SM_90", "sm_05"}) {
        EXPECT_FALSE(parse_cuda_arch(bad).has_value()) << bad;
    }
}

TEST(CudaArch, ToolkitLimitsFollowTheArchFacts) {
    const auto problem = [](const char* cuda, const char* arch) {
        return toolkit_arch_problem(parse_cuda_version(cuda).value(), parse_cuda_arch(arch).value());
    };
    EXPECT_TRUE(problem("13.0", "sm_70"));   // CUDA 13 targets sm_75 and newer only
    EXPECT_FALSE(problem("13.0", "sm_75"));
    EXPECT_FALSE(problem("12.9", "sm_70"));
    EXPECT_TRUE(problem("12.4", "sm_100"));  // sm_100 and sm_120 need CUDA >= 12.8
    EXPECT_TRUE(problem("12.6", "sm_120"));
    EXPECT_FALSE(problem("12.8", "sm_120"));
    EXPECT_TRUE(problem("12.8", "sm_120f"));  // family targets arrived with 12.9
    EXPECT_FALSE(problem("12.9", "sm_120f"));
    EXPECT_TRUE(problem("12.9", "sm_80a"));
    EXPECT_FALSE(problem("12.0", "sm_90a"));
    EXPECT_TRUE(problem("11.7", "sm_90"));
}

TEST(WheelFileName, ParsesTheVariantStyle) {
    const std::optional<WheelFileName> name = parse_wheel_filename("culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl");
    ASSERT_TRUE(name);
    EXPECT_EQ(name->distribution, "culina");
    EXPECT_EQ(name->version, "0.1.0");
    EXPECT_EQ(name->build, "");
    EXPECT_EQ(name->compressed_tag, "cp312-cp312-manylinux_2_28_x86_64");
    EXPECT_EQ(name->variant, "cu130");

    const std::optional<WheelFileName> with_build =
        parse_wheel_filename("culina-0.1.0-1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64-null.whl");
    ASSERT_TRUE(with_build);
    EXPECT_EQ(with_build->build, "1");
    EXPECT_EQ(with_build->compressed_tag, "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64");
    EXPECT_EQ(with_build->variant, "null");
}

TEST(WheelFileName, RejectsOtherNames) {
    for (const char* bad : {"culina-0.1.0.tar.gz", "culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
                            "culina-0.1.0-x-cp312-cp312-linux_x86_64-cu130.whl", "dir/culina-0.1.0-cp312-cp312-linux_x86_64-cu130.whl",
                            "culina-0.1.0-cp312-cp312-linux_x86_64-CU130.whl", "culina-0.1.0-cp312--linux_x86_64-cu130.whl", ".whl"}) {
        EXPECT_FALSE(parse_wheel_filename(bad).has_value()) << bad;
    }
}

TEST(WheelTags, ExpandsCompressedTags) {
    EXPECT_EQ(expand_compressed_tag("cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64"),
              (std::vector<std::string>{"cp312-cp312-manylinux_2_17_x86_64", "cp312-cp312-manylinux2014_x86_64"}));
    EXPECT_EQ(expand_compressed_tag("py2.py3-none-any"), (std::vector<std::string>{"py2-none-any", "py3-none-any"}));
    EXPECT_FALSE(expand_compressed_tag("cp312-cp312"));
    EXPECT_FALSE(expand_compressed_tag("cp312-cp312-linux..x86_64"));
    EXPECT_FALSE(expand_compressed_tag("cp312-cp312-linux x86_64"));
}

TEST(WheelNames, NormalizesDistributionNames) {
    EXPECT_EQ(normalize_distribution_name("Culina"), "culina");
    EXPECT_EQ(normalize_distribution_name("my-.-kernels"), "my_kernels");
    EXPECT_EQ(normalize_distribution_name("Culina_Kernels"), "culina_kernels");
    EXPECT_EQ(normalize_distribution_name("a.-_b"), "a_b");
}

TEST(VariantProperties, ParseAndDerive) {
    const std::optional<VariantProperty> property = parse_variant_property("nvidia :: sm_arch :: 90_real");
    ASSERT_TRUE(property);
    EXPECT_EQ(property->name_space, "nvidia");
    EXPECT_EQ(property->feature, "sm_arch");
    EXPECT_EQ(property->value, "90_real");
    for (const char* bad : {"nvidia::sm_arch::90_real", "nvidia :: sm_arch", " :: sm_arch :: 90", "nvidia :: sm arch :: 90",
                            "nvidia :: sm_arch :: 90 real"}) {
        EXPECT_FALSE(parse_variant_property(bad)) << bad;
    }
    EXPECT_EQ(expected_nvidia_properties(CudaVersion{13, 0}, {parse_cuda_arch("sm_90a").value(), parse_cuda_arch("compute_120").value()}),
              (std::vector<std::string>{"nvidia :: cuda_version_lower_bound :: 13.0", "nvidia :: sm_arch :: 90a_real",
                                        "nvidia :: sm_arch :: 120_virtual"}));
    EXPECT_TRUE(expected_nvidia_properties(std::nullopt, {}).empty());
}

}  // namespace
}  // namespace culina
