// The selection policy, case by case: one row per host/release/request situation.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "manifest/variant_properties.h"
#include "policy/build_archs.h"
#include "policy/select_wheel.h"

namespace culina {
namespace {

const std::string kTag312 = "cp312-cp312-manylinux_2_28_x86_64";
const std::string kTag312Old = "cp312-cp312-manylinux_2_17_x86_64";
const std::string kTag311 = "cp311-cp311-manylinux_2_28_x86_64";

// What the interpreter of the tests supports, best first.
const std::vector<std::string> kSupportedTags = {kTag312, kTag312Old, "cp312-abi3-manylinux_2_28_x86_64", "py3-none-any"};

WheelEntry wheel(const std::string& label, const std::string& cuda, std::vector<std::string> sass, std::vector<std::string> ptx,
                 const std::string& tag = kTag312) {
    WheelEntry entry;
    entry.file = "culina-0.1.0-" + tag + "-" + label + ".whl";
    entry.sha256 = std::string(64, 'a');
    entry.size = 1000;
    entry.tags = {tag};
    entry.variant = label;
    if (!cuda.empty()) entry.cuda = parse_cuda_version(cuda).value();
    entry.sass = std::move(sass);
    entry.ptx = std::move(ptx);
    return entry;
}

WheelEntry cu130(const std::string& tag = kTag312) {
    return wheel("cu130", "13.0", {"sm_75", "sm_80", "sm_90", "sm_100", "sm_120"}, {"compute_120"}, tag);
}
WheelEntry cu129(const std::string& tag = kTag312) {
    return wheel("cu129", "12.9", {"sm_70", "sm_75", "sm_80", "sm_90", "sm_100", "sm_120"}, {"compute_120"}, tag);
}
WheelEntry cpu(const std::string& tag = kTag312) { return wheel("null", "", {}, {}, tag); }

struct PolicyCase {
    const char* name;
    std::vector<std::string> gpus;  // compute capabilities, one per GPU
    const char* driver_cuda;        // "" = no driver
    const char* toolkit_cuda;       // "" = no toolkit
    std::vector<WheelEntry> wheels;
    const char* variant;            // CULINA_VARIANT
    Action action;
    const char* chosen;             // label of the installed wheel, "" for none
    std::vector<std::string> mentions;     // each must appear in the decision's text
    std::vector<std::string> local_archs;  // checked when not empty
};

HostInfo make_host(const PolicyCase& row) {
    HostInfo host;
    for (size_t i = 0; i < row.gpus.size(); ++i) {
        host.gpus.push_back({static_cast<int>(i), "GPU", parse_compute_capability(row.gpus[i]).value()});
    }
    if (*row.driver_cuda) host.driver.cuda = parse_cuda_version(row.driver_cuda).value();
    if (*row.toolkit_cuda) host.toolkit = ToolkitInfo{"/usr/local/cuda/bin/nvcc", parse_cuda_version(row.toolkit_cuda).value()};
    return host;
}

// Everything a person would read: reason, warnings, assumption, hint and each candidate.
std::string all_text(const Decision& decision) {
    std::string text = decision.reason + "\n";
    for (const std::string& warning : decision.warnings) text += warning + "\n";
    text += decision.assumption.value_or("") + "\n" + decision.override_hint.value_or("") + "\n";
    for (const Candidate& candidate : decision.candidates) text += candidate.variant + ": " + candidate.reason + "\n";
    return text;
}

Decision decide(const PolicyCase& row) {
    SelectionInput input;
    input.host = make_host(row);
    input.supported_tags = kSupportedTags;
    input.manifest.name = "culina";
    input.manifest.version = "0.1.0";
    input.manifest.wheels = row.wheels;
    input.request = *parse_variant_request(row.variant);
    input.default_archs = parse_arch_list(kDefaultLocalBuildArchs, "default");
    return select_wheel(input);
}

const std::vector<std::string> kNone;

const PolicyCase kCases[] = {
    // --- SASS coverage, newest CUDA wins ---
    {"h200_gets_newest_cuda", {"9.0"}, "13.0", "", {cu130(), cu129(), cpu()}, "auto", Action::install_wheel, "cu130",
     {"GPU 0 (9.0) via sm_90 SASS", "not chosen: cu130 is built with a newer CUDA"}, {"9.0"}},
    {"newest_cuda_wins_whatever_the_manifest_order", {"9.0"}, "13.0", "", {cu129(), cpu(), cu130()}, "auto", Action::install_wheel,
     "cu130", {}, {}},
    {"v100_on_cu130_only_release_without_toolkit_is_an_error", {"7.0"}, "13.0", "", {cu130()}, "auto", Action::error, "",
     {"cu130: GPU 0 (7.0) not covered: binary has sm_75,sm_80,sm_90,sm_100,sm_120 + compute_120", "no CUDA toolkit",
      "install a CUDA 11.x or 12.x toolkit", "CULINA_VARIANT=null"},
     {"7.0"}},
    {"v100_on_cu130_only_release_builds_with_cuda12_toolkit", {"7.0"}, "13.0", "12.9", {cu130()}, "auto", Action::build_local, "",
     {"building locally with the CUDA 12.9 toolkit for 7.0"}, {"7.0"}},
    {"v100_on_cu130_only_release_cannot_build_with_cuda13_toolkit", {"7.0"}, "13.0", "13.0", {cu130()}, "auto", Action::error, "",
     {"CUDA 13.0 targets sm_75 and newer only", "install a CUDA 11.x or 12.x toolkit"}, {}},
    {"v100_takes_cu129_from_full_release", {"7.0"}, "13.0", "", {cu130(), cu129(), cpu()}, "auto", Action::install_wheel, "cu129",
     {"cu130: GPU 0 (7.0) not covered", "GPU 0 (7.0) via sm_70 SASS"}, {}},
    {"rtx4090_runs_sm80_sass", {"8.9"}, "12.9", "", {wheel("cu129", "12.9", {"sm_80"}, {})}, "auto", Action::install_wheel, "cu129",
     {"GPU 0 (8.9) via sm_80 SASS"}, {"8.9"}},
    {"rtx4090_not_covered_by_sm90_sass_or_ptx", {"8.9"}, "13.0", "", {wheel("cu130", "13.0", {"sm_90"}, {"compute_90"})}, "auto",
     Action::error, "", {"GPU 0 (8.9) not covered: binary has sm_90 + compute_90"}, {}},
    {"sm_same_major_only", {"8.0"}, "13.0", "", {wheel("cu130", "13.0", {"sm_75"}, {})}, "auto", Action::error, "",
     {"GPU 0 (8.0) not covered: binary has sm_75"}, {}},
    // --- 'a' and 'f' architectures ---
    {"sm90a_only_wheel_on_9_0", {"9.0"}, "13.0", "", {wheel("cu130", "13.0", {"sm_90a"}, {})}, "auto", Action::install_wheel, "cu130",
     {"GPU 0 (9.0) via sm_90a SASS"}, {}},
    {"sm90a_only_wheel_on_10_0", {"10.0"}, "13.0", "13.0", {wheel("cu130", "13.0", {"sm_90a"}, {})}, "auto", Action::build_local, "",
     {"GPU 0 (10.0) not covered: binary has sm_90a"}, {"10.0"}},
    // The release's fat wheel: Hopper's own kernels as sm_90a beside the portable list, which
    // still serves every other GPU.
    {"fat_wheel_with_sm90a_on_9_0", {"9.0"}, "13.0", "", {wheel("cu130", "13.0", {"sm_80", "sm_90", "sm_90a", "sm_100", "sm_120"}, {"compute_120"})},
     "auto", Action::install_wheel, "cu130", {"GPU 0 (9.0) via sm_90"}, {}},
    {"fat_wheel_with_sm90a_on_8_6", {"8.6"}, "13.0", "", {wheel("cu130", "13.0", {"sm_80", "sm_90", "sm_90a", "sm_100", "sm_120"}, {"compute_120"})},
     "auto", Action::install_wheel, "cu130", {"GPU 0 (8.6) via sm_80 SASS"}, {}},
    {"fat_wheel_with_sm90a_on_10_0", {"10.0"}, "13.0", "", {wheel("cu130", "13.0", {"sm_80", "sm_90", "sm_90a", "sm_100", "sm_120"}, {"compute_120"})},
     "auto", Action::install_wheel, "cu130", {"GPU 0 (10.0) via sm_100 SASS"}, {}},
    {"fat_wheel_with_sm90a_on_12_0", {"12.0"}, "13.0", "", {wheel("cu130", "13.0", {"sm_80", "sm_90", "sm_90a", "sm_100", "sm_120"}, {"compute_120"})},
     "auto", Action::install_wheel, "cu130", {"GPU 0 (12.0) via sm_120 SASS"}, {}},
    {"sm120f_on_12_1", {"12.1"}, "13.0", "", {wheel("cu130", "13.0", {"sm_100f", "sm_120f"}, {})}, "auto", Action::install_wheel,
     "cu130", {"GPU 0 (12.1) via sm_120f SASS"}, {"12.1"}},
    {"sm121f_not_on_12_0", {"12.0"}, "13.0", "", {wheel("cu130", "13.0", {"sm_121f"}, {})}, "auto", Action::error, "",
     {"GPU 0 (12.0) not covered: binary has sm_121f"}, {}},
    {"sm100f_not_on_other_major", {"12.0"}, "13.0", "", {wheel("cu130", "13.0", {"sm_100f"}, {})}, "auto", Action::error, "",
     {"not covered: binary has sm_100f"}, {}},
    // --- PTX and the driver ---
    {"ptx_covers_newer_gpu_when_driver_is_new_enough", {"12.0"}, "12.9", "", {wheel("cu129", "12.9", {"sm_90"}, {"compute_90"})},
     "auto", Action::install_wheel, "cu129", {"GPU 0 (12.0) via compute_90 PTX", "the driver compiles it at first use"}, {}},
    {"ptx_needs_driver_at_least_build_cuda", {"12.0"}, "12.4", "", {wheel("cu129", "12.9", {"sm_90"}, {"compute_90"})}, "auto",
     Action::error, "", {"only compute_90 PTX fits, and a driver supporting CUDA 12.4 cannot JIT PTX from CUDA 12.9"}, {}},
    {"driver_12_4_takes_cu129_sass_not_cu130", {"9.0"}, "12.4", "", {cu129(), cu130()}, "auto", Action::install_wheel, "cu129",
     {"built with CUDA 13.0, needs a driver supporting CUDA >= 13.0 (NVIDIA driver >= 580); this driver supports CUDA 12.4",
      "GPU 0 (9.0) via sm_90 SASS"},
     {}},
    {"old_driver_builds_with_matching_toolkit", {"8.0"}, "11.8", "11.8", {cu130(), cu129(), cpu()}, "auto", Action::build_local, "",
     {"NVIDIA driver >= 525.60.13", "building locally with the CUDA 11.8 toolkit for 8.0"}, {"8.0"}},
    {"old_driver_without_toolkit_says_what_to_update", {"8.0"}, "11.8", "", {cu130(), cu129(), cpu()}, "auto", Action::error, "",
     {"update the NVIDIA driver to a driver supporting CUDA >= 12.0 (NVIDIA driver >= 525.60.13) to use the cu129 wheel",
      "install a CUDA 11.x toolkit"},
     {}},
    {"toolkit_newer_than_driver_cannot_build", {"9.0"}, "12.4", "13.0", {cu130()}, "auto", Action::error, "",
     {"code built with CUDA 13.0, needs a driver supporting CUDA >= 13.0", "install a CUDA 11.x or 12.x toolkit"}, {}},
    {"gpu_without_driver_cuda", {"9.0"}, "", "", {cu130(), cpu()}, "auto", Action::error, "",
     {"no NVIDIA driver CUDA version was found"}, {}},
    // --- tags ---
    {"better_tag_rank_breaks_a_cuda_tie", {"9.0"}, "13.0", "", {cu130(kTag312Old), cu130(kTag312)}, "auto", Action::install_wheel,
     "cu130", {"not chosen: cu130 has a better tag rank"}, {}},
    {"unsupported_tags_are_rejected", {"9.0"}, "13.0", "13.0", {cu130(kTag311), cu129(kTag311)}, "auto", Action::build_local, "",
     {"no tag of this wheel (cp311-cp311-manylinux_2_28_x86_64) is supported by this interpreter"}, {"9.0"}},
    // --- mixed GPUs ---
    {"two_gpus_both_covered", {"8.6", "9.0"}, "13.0", "", {cu130(), cu129()}, "auto", Action::install_wheel, "cu130",
     {"GPU 0 (8.6) via sm_80 SASS; GPU 1 (9.0) via sm_90 SASS"}, {"8.6", "9.0"}},
    {"two_gpus_one_not_covered_by_newest", {"9.0", "7.0"}, "13.0", "", {cu130(), cu129(), cpu()}, "auto", Action::install_wheel,
     "cu129", {"cu130: GPU 1 (7.0) not covered"}, {"7.0", "9.0"}},
    {"two_gpus_no_wheel_builds_for_both", {"12.0", "7.0"}, "13.0", "12.9", {cu130()}, "auto", Action::build_local, "", {},
     {"7.0", "12.0"}},
    {"two_gpus_sm90a_wheel_misses_10_0", {"9.0", "10.0"}, "13.0", "", {wheel("cu130", "13.0", {"sm_90a"}, {})}, "auto", Action::error,
     "", {"GPU 1 (10.0) not covered"}, {}},
    {"eight_identical_gpus_are_one_group", {"9.0", "9.0", "9.0", "9.0", "9.0", "9.0", "9.0", "9.0"}, "13.0", "", {cu130()}, "auto",
     Action::install_wheel, "cu130", {"GPUs 0,1,2,3,4,5,6,7 (9.0) via sm_90 SASS"}, {"9.0"}},
    {"gpu_host_never_gets_cpu_wheel_silently", {"9.0"}, "13.0", "", {cpu()}, "auto", Action::error, "",
     {"CPU-only variant; this host has GPU 0 (9.0)", "no CUDA toolkit"}, {}},
    // --- no GPU visible ---
    {"no_gpu_with_cuda13_toolkit_takes_cu130", {}, "", "13.0", {cu129(), cu130(), cpu()}, "auto", Action::install_wheel, "cu130",
     {"assumed a CUDA build host", "CULINA_OVERRIDE_SM", "CULINA_VARIANT"}, {"7.5", "8.0", "9.0", "10.0", "12.0+PTX"}},
    {"no_gpu_with_cuda12_toolkit_takes_cu129", {}, "", "12.6", {cu130(), cu129(), cpu()}, "auto", Action::install_wheel, "cu129",
     {"cu130: built with CUDA 13.0; a build host takes the variant of its toolkit's CUDA major (12.x)"}, {}},
    {"no_gpu_with_cuda11_toolkit_builds_what_it_can", {}, "", "11.8", {cu130(), cu129(), cpu()}, "auto", Action::build_local, "",
     {"skips configured architecture 10.0", "skips configured architecture 12.0+PTX"}, {"7.5", "8.0", "9.0+PTX"}},
    {"no_gpu_no_driver_no_toolkit_takes_cpu_wheel", {}, "", "", {cu130(), cu129(), cpu()}, "auto", Action::install_wheel, "null",
     {"assumed a CPU-only host", "CULINA_OVERRIDE_SM"}, {}},
    {"no_gpu_no_driver_no_toolkit_no_cpu_wheel_builds_cpu", {}, "", "", {cu130()}, "auto", Action::build_cpu, "",
     {"assumed a CPU-only host"}, {}},
    {"no_gpu_with_driver_takes_newest_runnable", {}, "12.8", "", {cu130(), cu129(), cpu()}, "auto", Action::install_wheel, "cu129",
     {"assumed its GPUs will be visible at run time"}, {}},
    {"no_gpu_hint_names_only_variants_with_a_wheel_for_this_interpreter", {}, "", "13.0", {cu130(), cu129(kTag311), cpu()}, "auto",
     Action::install_wheel, "cu130", {"CULINA_VARIANT to one of cu130, null, or source"}, {}},
    {"no_gpu_hint_on_an_interpreter_without_wheels_suggests_a_local_build", {}, "", "13.0", {cu130(kTag311), cu129(kTag311)},
     "auto", Action::build_local, "",
     {"CULINA_VARIANT to source to build locally (no wheel of culina 0.1.0 is built for this interpreter and platform)"}, {}},
    {"no_gpu_with_old_driver_falls_back_to_cpu_wheel", {}, "11.8", "", {cu130(), cu129(), cpu()}, "auto", Action::install_wheel,
     "null", {"installing the CPU-only variant"}, {}},
    // --- CULINA_VARIANT ---
    {"variant_label_chooses_that_wheel", {"9.0"}, "13.0", "", {cu130(), cu129()}, "cu129", Action::install_wheel, "cu129",
     {"CULINA_VARIANT=cu129 asks for this variant", "cu130: not the requested variant (CULINA_VARIANT=cu129)"}, {}},
    {"variant_label_forces_a_wheel_the_host_cannot_run", {"7.0"}, "13.0", "", {cu130(), cu129()}, "cu130", Action::install_wheel,
     "cu130", {"forces a wheel this host may not run: GPU 0 (7.0) not covered"}, {}},
    {"variant_label_missing_from_release", {"9.0"}, "13.0", "", {cu130(), cu129(), cpu()}, "cu118", Action::error, "",
     {"has no variant 'cu118'; it has: cu130, cu129, null"}, {}},
    {"variant_label_without_wheel_for_this_python", {"9.0"}, "13.0", "", {cu130(kTag311), cu129()}, "cu130", Action::error, "",
     {"no cu130 wheel fits this interpreter", "Set CULINA_VARIANT to auto or to cu129 or source"}, {}},
    {"variant_label_missing_on_an_interpreter_without_wheels_suggests_a_local_build", {"9.0"}, "13.0", "", {cu130(kTag311)}, "cu118",
     Action::error, "", {"it has: cu130", "Set CULINA_VARIANT to auto or to source to build locally"}, {}},
    {"variant_cpu_alias_on_gpu_host", {"9.0"}, "13.0", "", {cu130(), cpu()}, "cpu", Action::install_wheel, "null",
     {"CULINA_VARIANT=null forces a wheel this host may not run: CPU-only variant"}, {}},
    {"variant_null_without_cpu_wheel_builds_cpu", {"9.0"}, "13.0", "", {cu130()}, "null", Action::build_cpu, "",
     {"no CPU-only wheel"}, {}},
    {"variant_source_builds_for_gpus", {"8.6", "9.0"}, "13.0", "12.9", {cu130(), cu129()}, "source", Action::build_local, "",
     {"CULINA_VARIANT=source: prebuilt wheels are not used"}, {"8.6", "9.0"}},
    {"variant_source_without_toolkit_is_an_error", {"9.0"}, "13.0", "", {cu130()}, "source", Action::error, "",
     {"no CUDA toolkit"}, {}},
    {"variant_source_on_cpu_host_builds_cpu", {}, "", "", {cu130(), cpu()}, "source", Action::build_cpu, "",
     {"assumed a CPU-only host"}, {}},
};

// Test names carry the case; print only the name instead of the bytes.
void PrintTo(const PolicyCase& row, std::ostream* out) { *out << row.name; }

class Policy : public testing::TestWithParam<PolicyCase> {};

TEST_P(Policy, Decides) {
    const PolicyCase& row = GetParam();
    const Decision decision = decide(row);
    const std::string text = all_text(decision);
    EXPECT_EQ(action_name(decision.action), std::string(action_name(row.action))) << text;
    if (*row.chosen) {
        ASSERT_TRUE(decision.wheel.has_value()) << text;
        EXPECT_EQ(decision.wheel->variant, row.chosen) << text;
        EXPECT_EQ(decision.wheel->tags, (std::vector<std::string>{kTag312})) << text;
    } else {
        EXPECT_FALSE(decision.wheel.has_value()) << text;
    }
    for (const std::string& mention : row.mentions) EXPECT_NE(text.find(mention), std::string::npos) << mention << "\n---\n" << text;
    if (!row.local_archs.empty()) EXPECT_EQ(decision.local_build_archs, row.local_archs) << text;
    ASSERT_EQ(decision.candidates.size(), row.wheels.size());
    for (const Candidate& candidate : decision.candidates) {
        EXPECT_FALSE(candidate.reason.empty()) << candidate.file;
        EXPECT_EQ(candidate.chosen, decision.wheel && decision.wheel->file == candidate.file) << candidate.file;
    }
    EXPECT_FALSE(decision.reason.empty());
}

INSTANTIATE_TEST_SUITE_P(Selection, Policy, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<PolicyCase>& info) { return std::string(info.param.name); });

TEST(PolicyDecision, GpuHostHasNoAssumption) {
    const Decision decision = decide(kCases[0]);
    EXPECT_FALSE(decision.assumption.has_value());
    EXPECT_FALSE(decision.override_hint.has_value());
    EXPECT_EQ(decision.variant_request, "auto");
    EXPECT_EQ(decision.host.gpus, (std::vector<std::string>{"9.0"}));
    EXPECT_EQ(decision.host.driver_cuda, (CudaVersion{13, 0}));
}

// With no toolkit installed, a local build may take one from NVIDIA's PyPI packages: only for a
// CUDA 13 driver (no nvcc for CUDA 12 on PyPI), GPUs that toolkit can build, and not offline.
Decision decide_without_toolkit(const std::vector<std::string>& gpus, const char* driver, bool pypi_allowed) {
    SelectionInput input;
    input.host = make_host({"", gpus, driver, "", {}, "source", Action::error, "", {}, {}});
    input.supported_tags = kSupportedTags;
    input.manifest.name = "culina";
    input.manifest.version = "0.1.0";
    input.request = VariantRequest::source_build();
    input.default_archs = parse_arch_list(kDefaultLocalBuildArchs, "default");
    input.pypi_toolkit_allowed = pypi_allowed;
    return select_wheel(input);
}

TEST(PolicyPypiToolkit, ACuda13DriverBuildsWithTheNewestToolkitItRuns) {
    const Decision decision = decide_without_toolkit({"9.0", "12.0"}, "13.2", true);
    EXPECT_EQ(decision.action, Action::build_local);
    EXPECT_EQ(decision.pypi_toolkit, (CudaVersion{13, 2}));
    EXPECT_EQ(decision.local_build_archs, (std::vector<std::string>{"9.0", "12.0"}));
    EXPECT_NE(decision.reason.find("from NVIDIA's PyPI packages up to 13.2"), std::string::npos) << decision.reason;
    EXPECT_EQ(decision_to_json(decision)["pypi_toolkit"], "13.2");
}

TEST(PolicyPypiToolkit, NotForACuda12DriverNorOfflineNorAGpuCuda13CannotBuild) {
    for (const auto& [gpus, driver, allowed, missing] :
         std::vector<std::tuple<std::vector<std::string>, const char*, bool, const char*>>{
             {{"9.0"}, "12.8", true, "install a CUDA 11.x or 12.x toolkit"},
             {{"9.0"}, "13.0", false, "CULINA_OFFLINE=1 forbids fetching one from PyPI"},
             {{"6.1"}, "13.0", true, "install a CUDA 11.x or 12.x toolkit"}}) {
        const Decision decision = decide_without_toolkit(gpus, driver, allowed);
        EXPECT_EQ(decision.action, Action::error) << driver;
        EXPECT_FALSE(decision.pypi_toolkit.has_value());
        EXPECT_NE(all_text(decision).find(missing), std::string::npos) << all_text(decision);
    }
}

// The issue this guards: on Python 3.13 the hint said CULINA_VARIANT=cu130, which then failed
// with "no cu130 wheel fits this interpreter".
TEST(PolicyDecision, HintNeverNamesAVariantWithoutAWheelForThisInterpreter) {
    const PolicyCase row{"no_gpu_only_cp311_wheels", {}, "", "13.0", {cu130(kTag311), cpu(kTag311)}, "auto", Action::build_local, "",
                         {}, {}};
    const Decision decision = decide(row);
    ASSERT_TRUE(decision.override_hint.has_value());
    EXPECT_EQ(decision.override_hint->find("cu130"), std::string::npos) << *decision.override_hint;
    EXPECT_EQ(decision.override_hint->find("null"), std::string::npos) << *decision.override_hint;
    EXPECT_NE(decision.override_hint->find("CULINA_VARIANT to source to build locally"), std::string::npos) << *decision.override_hint;
}

TEST(PolicyDecision, JsonHasEveryPart) {
    const nlohmann::json out = decision_to_json(decide(kCases[0]));
    EXPECT_EQ(out["action"], "install_wheel");
    EXPECT_EQ(out["wheel"]["variant"], "cu130");
    EXPECT_EQ(out["wheel"]["cuda"], "13.0");
    EXPECT_EQ(out["wheel"]["sha256"], std::string(64, 'a'));
    EXPECT_EQ(out["local_build_archs"], nlohmann::json::array({"9.0"}));
    EXPECT_EQ(out["host"]["driver_cuda"], "13.0");
    EXPECT_TRUE(out["host"]["toolkit_cuda"].is_null());
    EXPECT_TRUE(out["assumption"].is_null());
    ASSERT_EQ(out["candidates"].size(), 3u);
    EXPECT_EQ(out["candidates"][0]["chosen"], true);
    EXPECT_EQ(out["candidates"][1]["accepted"], true);
    EXPECT_EQ(out["candidates"][1]["chosen"], false);
    EXPECT_EQ(out["candidates"][2]["accepted"], false);
    EXPECT_EQ(out["candidates"][2]["cuda"], nullptr);
    EXPECT_EQ(out["candidates"][0]["tag_rank"], 0);
}

TEST(PolicyDecision, JsonOfAnErrorHasNoWheel) {
    const nlohmann::json out = decision_to_json(decide(kCases[2]));
    EXPECT_EQ(out["action"], "error");
    EXPECT_TRUE(out["wheel"].is_null());
}

TEST(PolicyDecision, TableShowsActionReasonAndEveryCandidate) {
    const std::string table = decision_to_table(decide(kCases[5]), SettingNames{});
    EXPECT_NE(table.find("decision     install_wheel  culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu129.whl"), std::string::npos)
        << table;
    EXPECT_NE(table.find("rejected  cu130"), std::string::npos) << table;
    EXPECT_NE(table.find("chosen    cu129"), std::string::npos) << table;
    EXPECT_NE(table.find("rejected  null"), std::string::npos) << table;
    EXPECT_NE(table.find("local build  7.0"), std::string::npos) << table;
}

// --- The release's own lists: pyproject.toml's [tool.culina.release_archs] (their owner), read here
// so that a change there is checked against the GPUs each wheel must serve. ---

// CUDA major -> the list, e.g. "13" -> "7.5;8.0;9.0;10.0;11.0;12.0+PTX".
std::map<std::string, std::string> release_arch_lists() {
    const std::string path = std::string(CULINA_TEST_DATA_DIR) + "/../../pyproject.toml";
    std::ifstream in(path);
    EXPECT_TRUE(in) << "cannot read " << path;
    const std::regex entry(R"re(^"(\d+)"\s*=\s*"([^"]*)"\s*$)re");
    std::map<std::string, std::string> lists;
    bool in_table = false;
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line[0] == '[') in_table = line == "[tool.culina.release_archs]";
        std::smatch match;
        if (in_table && std::regex_match(line, match, entry)) lists[match[1]] = match[2];
    }
    return lists;
}

// The manifest entry a release build writes for a wheel built with `list` (what build_release
// reads back out of the .so: SASS for every item, PTX for the +PTX ones).
WheelEntry release_wheel(const std::string& label, const std::string& cuda) {
    const std::map<std::string, std::string> lists = release_arch_lists();
    const std::string major = cuda.substr(0, cuda.find('.'));
    EXPECT_EQ(lists.count(major), 1u) << "pyproject.toml [tool.culina.release_archs] has no \"" << major << "\" list";
    std::vector<std::string> sass, ptx;
    for (std::string item : parse_arch_list(lists.count(major) ? lists.at(major) : "", "release_archs")) {
        const bool with_ptx = item.size() > 4 && item.compare(item.size() - 4, 4, "+PTX") == 0;
        if (with_ptx) item.resize(item.size() - 4);
        item.erase(item.find('.'), 1);  // "12.0" -> "120", "9.0a" -> "90a"
        sass.push_back("sm_" + item);
        if (with_ptx) ptx.push_back("compute_" + item);
    }
    return wheel(label, cuda, sass, ptx);
}

struct ReleaseCase {
    const char* name;
    const char* gpu;          // compute capability of the host's one GPU
    const char* driver_cuda;
    std::vector<std::string> cudas;  // one release wheel per CUDA version, labelled cu<digits>
    Action action;
    const char* chosen;
    std::vector<std::string> mentions;
};

const ReleaseCase kReleaseCases[] = {
    {"b300_10_3_takes_cu130_via_sm100", "10.3", "13.0", {"12.9", "13.0"}, Action::install_wheel, "cu130",
     {"GPU 0 (10.3) via sm_100 SASS"}},
    {"b300_10_3_on_a_cuda12_driver_takes_cu129_via_sm100", "10.3", "12.9", {"12.9", "13.0"}, Action::install_wheel, "cu129",
     {"GPU 0 (10.3) via sm_100 SASS"}},
    {"thor_11_0_takes_cu130_via_sm110", "11.0", "13.0", {"12.9", "13.0"}, Action::install_wheel, "cu130",
     {"GPU 0 (11.0) via sm_110 SASS", "cu129: GPU 0 (11.0) not covered"}},
    // No 11.0 SASS in a CUDA 12.9 wheel (that toolkit names Thor 10.1), and its PTX 12.0 cannot JIT down to 11.0.
    {"thor_11_0_is_not_covered_by_cu129", "11.0", "13.0", {"12.9"}, Action::error, "",
     {"cu129: GPU 0 (11.0) not covered: binary has sm_75,sm_80,sm_90,sm_100,sm_120 + compute_120"}},
    {"dgx_spark_12_1_takes_cu130_via_sm120", "12.1", "13.0", {"12.9", "13.0"}, Action::install_wheel, "cu130",
     {"GPU 0 (12.1) via sm_120 SASS"}},
    {"dgx_spark_12_1_on_a_cuda12_driver_takes_cu129_via_sm120", "12.1", "12.9", {"12.9", "13.0"}, Action::install_wheel, "cu129",
     {"GPU 0 (12.1) via sm_120 SASS"}},
    {"orin_8_7_on_jetpack6_takes_cu129_via_sm80", "8.7", "12.6", {"12.9", "13.0"}, Action::install_wheel, "cu129",
     {"GPU 0 (8.7) via sm_80 SASS"}},
    {"orin_8_7_on_a_cuda13_driver_takes_cu130_via_sm80", "8.7", "13.0", {"12.9", "13.0"}, Action::install_wheel, "cu130",
     {"GPU 0 (8.7) via sm_80 SASS"}},
    {"a_future_major_13_gpu_runs_the_newest_ptx", "13.0", "13.0", {"12.9", "13.0"}, Action::install_wheel, "cu130",
     {"GPU 0 (13.0) via compute_120 PTX"}},
};

void PrintTo(const ReleaseCase& row, std::ostream* out) { *out << row.name; }

class ReleaseLists : public testing::TestWithParam<ReleaseCase> {};

// Release wheels are aarch64 for Thor and Orin; the policy does not look at the platform, so the
// tests' x86_64 tag stands in for it.
TEST_P(ReleaseLists, CoverTheirGpus) {
    const ReleaseCase& row = GetParam();
    std::vector<WheelEntry> wheels;
    for (const std::string& cuda : row.cudas) {
        std::string label = "cu" + cuda;
        label.erase(label.find('.'), 1);
        wheels.push_back(release_wheel(label, cuda));
    }
    const Decision decision = decide({row.name, {row.gpu}, row.driver_cuda, "", wheels, "auto", row.action, row.chosen, {}, {}});
    const std::string text = all_text(decision);
    EXPECT_EQ(action_name(decision.action), std::string(action_name(row.action))) << text;
    if (*row.chosen) {
        ASSERT_TRUE(decision.wheel.has_value()) << text;
        EXPECT_EQ(decision.wheel->variant, row.chosen) << text;
    } else {
        EXPECT_FALSE(decision.wheel.has_value()) << text;
    }
    for (const std::string& mention : row.mentions) EXPECT_NE(text.find(mention), std::string::npos) << mention << "\n---\n" << text;
}

INSTANTIATE_TEST_SUITE_P(Release, ReleaseLists, testing::ValuesIn(kReleaseCases),
                         [](const testing::TestParamInfo<ReleaseCase>& info) { return std::string(info.param.name); });

TEST(ReleaseLists, Cuda13AddsThorAndBothKeepPtxForTheNewest) {
    const WheelEntry cu129 = release_wheel("cu129", "12.9"), cu130 = release_wheel("cu130", "13.0");
    EXPECT_EQ(cu129.sass, (std::vector<std::string>{"sm_75", "sm_80", "sm_90", "sm_100", "sm_120"}));
    EXPECT_EQ(cu130.sass, (std::vector<std::string>{"sm_75", "sm_80", "sm_90", "sm_100", "sm_110", "sm_120"}));
    EXPECT_EQ(cu129.ptx, (std::vector<std::string>{"compute_120"}));
    EXPECT_EQ(cu130.ptx, (std::vector<std::string>{"compute_120"}));
}

}  // namespace
}  // namespace culina
