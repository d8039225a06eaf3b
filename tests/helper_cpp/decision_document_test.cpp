// The decision document the install adapter reads (helper_client.Decision): versioned, and
// carrying the toolkit a local build compiles with (its nvcc, root, version and where the probe
// found it), so the build searches for none.
#include <gtest/gtest.h>

#include "policy/decision.h"

namespace culina {
namespace {

Decision local_build_with(const std::string& nvcc, const std::string& found_in) {
    Decision decision;
    decision.action = Action::build_local;
    decision.reason = "no wheel fits";
    decision.local_build_archs = {"9.0"};
    decision.build_toolkit = ToolkitInfo{nvcc, CudaVersion{13, 0}, found_in};
    return decision;
}

TEST(DecisionDocument, NamesItsSchemaVersion) {
    EXPECT_EQ(kDecisionSchemaVersion, 1);
    EXPECT_EQ(decision_to_json(Decision{})["schema_version"], 1);
    EXPECT_EQ(decision_to_json(local_build_with("/usr/local/cuda-13.0/bin/nvcc", "PATH"))["schema_version"], 1);
}

TEST(DecisionDocument, AnInstalledToolkitComesWithItsRootAndWhereItWasFound) {
    const nlohmann::json toolkit = decision_to_json(local_build_with("/usr/local/cuda-13.0/bin/nvcc", "CUDA_HOME"))["build_toolkit"];
    EXPECT_EQ(toolkit, (nlohmann::json{{"nvcc", "/usr/local/cuda-13.0/bin/nvcc"},
                                       {"root", "/usr/local/cuda-13.0"},
                                       {"cuda", "13.0"},
                                       {"found_in", "CUDA_HOME"}}));
    EXPECT_EQ(decision_to_json(local_build_with("/bin/nvcc", "PATH"))["build_toolkit"]["root"], "/");
}

TEST(DecisionDocument, NoInstalledToolkitIsNull) {
    Decision decision = local_build_with("/opt/cuda/bin/nvcc", "PATH");
    decision.build_toolkit.reset();
    decision.pypi_toolkit = CudaVersion{13, 2};
    const nlohmann::json document = decision_to_json(decision);
    EXPECT_TRUE(document["build_toolkit"].is_null());
    EXPECT_EQ(document["pypi_toolkit"], "13.2");
}

TEST(DecisionDocument, AnErrorTableLeavesItsReasonToACallerThatStatesIt) {
    Decision decision;
    decision.reason = "nothing fits GPU 0 (6.1)";
    EXPECT_NE(decision_to_table(decision, SettingNames{}).find("reason       nothing fits"), std::string::npos);
    const std::string without = decision_to_table(decision, SettingNames{}, false);
    EXPECT_EQ(without.find("nothing fits"), std::string::npos) << without;
    EXPECT_NE(without.find("decision     error"), std::string::npos) << without;
    // Only an error's reason: the adapter states other decisions in its own words.
    EXPECT_NE(decision_to_table(local_build_with("/opt/cuda/bin/nvcc", "PATH"), SettingNames{}, false).find("no wheel fits"),
              std::string::npos);
}

}  // namespace
}  // namespace culina
