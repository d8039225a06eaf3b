// AMD GPUs: the KFD topology parser, the detector on fake sysfs trees, and what the policy says
// to a host whose only GPUs are AMD's (no ROCm build: the CPU build, said so).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "policy/build_archs.h"
#include "policy/select_wheel.h"
#include "probe/amd_gpu_probe.h"

namespace culina {
namespace {

// What an MI300X's node publishes, cut to the lines that matter and a few around them.
const char* kMi300xNode =
    "cpu_cores_count 0\nsimd_count 1216\nmem_banks_count 1\ncaches_count 546\nio_links_count 1\n"
    "gfx_target_version 90402\nvendor_id 4098\ndevice_id 29856\nlocation_id 256\n";
const char* kCpuNode = "cpu_cores_count 96\nsimd_count 0\nmem_banks_count 1\ngfx_target_version 0\n";

TEST(KfdNodeProperties, ReadsAGpuNode) {
    const std::optional<AmdGpuInfo> gpu = parse_kfd_node_properties(kMi300xNode, 2);
    ASSERT_TRUE(gpu.has_value());
    EXPECT_EQ(gpu->node, 2);
    EXPECT_EQ(gpu->gfx, "gfx942");
}

TEST(KfdNodeProperties, ACpuNodeOrBrokenTextIsNoGpu) {
    EXPECT_FALSE(parse_kfd_node_properties(kCpuNode, 0).has_value());
    for (const char* bad : {"", "simd_count 64\n", "gfx_target_version 90402\n", "simd_count x\ngfx_target_version 90402\n",
                            "simd_count 64 1\ngfx_target_version 90402\n", "simd_count 64\ngfx_target_version -1\n"}) {
        EXPECT_FALSE(parse_kfd_node_properties(bad, 1).has_value()) << bad;
    }
}

TEST(KfdNodeProperties, NamesTheIsaAsRocmDoes) {
    EXPECT_EQ(gfx_target_name(90402), "gfx942");
    EXPECT_EQ(gfx_target_name(90010), "gfx90a");
    EXPECT_EQ(gfx_target_name(110000), "gfx1100");
    EXPECT_EQ(gfx_target_name(100300), "gfx1030");
}

class FakeTopology : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = std::filesystem::temp_directory_path() /
                ("culina-kfd-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
        std::filesystem::remove_all(root_);
        std::filesystem::create_directories(root_);
    }
    void TearDown() override { std::filesystem::remove_all(root_); }
    void node(const std::string& name, const char* properties) {
        std::filesystem::create_directories(root_ / name);
        std::ofstream(root_ / name / "properties") << properties;
    }
    std::filesystem::path root_;
};

TEST_F(FakeTopology, FindsEveryGpuNodeInNodeOrder) {
    node("0", kCpuNode);
    node("10", kMi300xNode);
    node("2", kMi300xNode);
    node("not-a-node", kMi300xNode);
    std::filesystem::create_directories(root_ / "3");  // no properties file
    const std::vector<AmdGpuInfo> gpus = probe_amd_gpus(root_.string());
    ASSERT_EQ(gpus.size(), 2u);
    EXPECT_EQ(gpus[0].node, 2);
    EXPECT_EQ(gpus[1].node, 10);
}

TEST_F(FakeTopology, NoTopologyMeansNoAmdGpu) {
    EXPECT_TRUE(probe_amd_gpus((root_ / "absent").string()).empty());
    node("0", kCpuNode);
    EXPECT_TRUE(probe_amd_gpus(root_.string()).empty());
}

WheelEntry wheel(const std::string& label, const std::string& cuda) {
    WheelEntry entry;
    entry.file = "culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-" + label + ".whl";
    entry.sha256 = std::string(64, 'a');
    entry.size = 1000;
    entry.tags = {"cp312-cp312-manylinux_2_28_x86_64"};
    entry.variant = label;
    if (!cuda.empty()) {
        entry.cuda = parse_cuda_version(cuda).value();
        entry.sass = {"sm_90"};
    }
    return entry;
}

Decision decide_for_amd_host(std::vector<WheelEntry> wheels) {
    SelectionInput input;
    input.host.amd_gpus = {{1, "gfx942"}, {2, "gfx942"}};
    input.supported_tags = {"cp312-cp312-manylinux_2_28_x86_64"};
    input.manifest.name = "culina";
    input.manifest.version = "0.1.0";
    input.manifest.wheels = std::move(wheels);
    input.request = *parse_variant_request("auto");
    input.default_archs = parse_arch_list(kDefaultLocalBuildArchs, "default");
    return select_wheel(input);
}

const char* kNoRocm = "this host's AMD GPU nodes 1,2 (gfx942) cannot be served: culina has no ROCm build, so the CPU build is installed";

TEST(AmdHostPolicy, GetsTheCpuWheelAndIsToldWhy) {
    const Decision decision = decide_for_amd_host({wheel("cu130", "13.0"), wheel("null", "")});
    EXPECT_EQ(decision.action, Action::install_wheel);
    EXPECT_EQ(decision.wheel->variant, "null");
    EXPECT_NE(decision.reason.find(kNoRocm), std::string::npos) << decision.reason;
    ASSERT_FALSE(decision.warnings.empty());
    EXPECT_EQ(decision.warnings.front(), "AMD GPU nodes 1,2 (gfx942) not used: culina has no ROCm build");
}

TEST(AmdHostPolicy, BuildsTheCpuVariantWhenTheReleaseHasNoCpuWheel) {
    const Decision decision = decide_for_amd_host({wheel("cu130", "13.0")});
    EXPECT_EQ(decision.action, Action::build_cpu);
    EXPECT_NE(decision.reason.find(kNoRocm), std::string::npos) << decision.reason;
}

TEST(AmdHostPolicy, AHostWithoutAmdGpusIsToldNothingAboutRocm) {
    SelectionInput input;
    input.supported_tags = {"cp312-cp312-manylinux_2_28_x86_64"};
    input.manifest.name = "culina";
    input.manifest.version = "0.1.0";
    input.manifest.wheels = {wheel("null", "")};
    input.request = *parse_variant_request("auto");
    const Decision decision = select_wheel(input);
    EXPECT_EQ(decision.reason.find("ROCm"), std::string::npos) << decision.reason;
    EXPECT_TRUE(decision.warnings.empty());
}

}  // namespace
}  // namespace culina
