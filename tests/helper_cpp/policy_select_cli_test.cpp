// `culina-resolver select` end to end: the real probe (driven by CULINA_OVERRIDE_* and a fake
// nvcc first on PATH), the manifest file, the tags file, the output and the exit status.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/text.h"

namespace culina {
namespace {

const std::string kManifests = std::string(CULINA_TEST_DATA_DIR) + "/manifests/";

struct CliRun {
    int exit_code = -1;
    std::string out;
    std::string err;
};

class SelectCli : public testing::Test {
protected:
    void SetUp() override {
        dir_ = testing::TempDir() + "select_cli_" + std::to_string(getpid()) + "/";
        ASSERT_EQ(std::system(("mkdir -p '" + dir_ + "bin'").c_str()), 0);
        // A stand-in nvcc, found before any real one, so the toolkit is the same on every machine.
        std::ofstream(dir_ + "bin/nvcc") << "#!/bin/sh\necho 'Cuda compilation tools, release 12.9, V12.9.86'\n";
        ASSERT_EQ(std::system(("chmod +x '" + dir_ + "bin/nvcc'").c_str()), 0);
        std::ofstream(dir_ + "tags.txt") << "cp312-cp312-manylinux_2_28_x86_64\ncp312-cp312-manylinux2014_x86_64\n"
                                            "cp312-cp312-manylinux_2_17_x86_64\npy3-none-any\n";
    }

    void TearDown() override {
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }

    // `environment` is a list of NAME=value words for env(1).
    CliRun select(const std::string& environment, const std::string& manifest, const std::string& extra = "--json") const {
        const std::string command = "env -u CUDA_HOME -u CUDA_PATH PATH='" + dir_ + "bin':\"$PATH\" " + environment + " '" + CULINA_RESOLVER_EXE +
                                    "' select --manifest '" + manifest + "' --tags '" + dir_ + "tags.txt' " + extra + " >'" + dir_ +
                                    "out' 2>'" + dir_ + "err'";
        const int status = std::system(command.c_str());
        CliRun run;
        run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        run.out = read_text_file(dir_ + "out").value_or("");
        run.err = read_text_file(dir_ + "err").value_or("");
        return run;
    }

    std::string dir_;
};

TEST_F(SelectCli, H200GetsTheCu130Wheel) {
    const CliRun run = select("CULINA_OVERRIDE_SM=9.0 CULINA_OVERRIDE_CUDA=13.0", kManifests + "release-0.1.0.json");
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const nlohmann::json decision = nlohmann::json::parse(run.out);
    EXPECT_EQ(decision["action"], "install_wheel");
    EXPECT_EQ(decision["wheel"]["file"], "culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl");
    EXPECT_EQ(decision["local_build_archs"], nlohmann::json::array({"9.0"}));
    EXPECT_EQ(decision["candidates"].size(), 6u);
    EXPECT_EQ(decision["host"]["toolkit_cuda"], "12.9");
    EXPECT_TRUE(decision["probe"].is_object());
}

TEST_F(SelectCli, V100OnCu130OnlyReleaseBuildsLocally) {
    const CliRun run = select("CULINA_OVERRIDE_SM=7.0 CULINA_OVERRIDE_CUDA=13.0", kManifests + "cu130-only.json");
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const nlohmann::json decision = nlohmann::json::parse(run.out);
    EXPECT_EQ(decision["action"], "build_local");
    EXPECT_EQ(decision["local_build_archs"], nlohmann::json::array({"7.0"}));
    EXPECT_EQ(decision["candidates"][0]["reason"],
              "GPU 0 (7.0) not covered: binary has sm_75,sm_80,sm_90,sm_100,sm_120 + compute_120");
}

TEST_F(SelectCli, CompressedWheelTagMatchesTheInterpreter) {
    const CliRun run = select("CULINA_OVERRIDE_SM=9.0 CULINA_OVERRIDE_CUDA=12.9", kManifests + "compressed-tags.json");
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const nlohmann::json decision = nlohmann::json::parse(run.out);
    EXPECT_EQ(decision["action"], "install_wheel");
    EXPECT_EQ(decision["candidates"][0]["tag_rank"], 1);
}

TEST_F(SelectCli, TableByDefault) {
    const CliRun run = select("CULINA_OVERRIDE_SM=9.0 CULINA_OVERRIDE_CUDA=13.0", kManifests + "release-0.1.0.json", "");
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_NE(run.out.find("decision     install_wheel"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("local build  9.0"), std::string::npos) << run.out;
}

TEST_F(SelectCli, VariantMissingFromReleaseExitsWithTheLabels) {
    const CliRun run = select("CULINA_OVERRIDE_SM=9.0 CULINA_OVERRIDE_CUDA=13.0 CULINA_VARIANT=cu118", kManifests + "release-0.1.0.json");
    EXPECT_EQ(run.exit_code, 3);
    EXPECT_NE(run.err.find("has no variant 'cu118'; it has: cu130, cu129, null"), std::string::npos) << run.err;
    EXPECT_EQ(nlohmann::json::parse(run.out)["action"], "error");
}

TEST_F(SelectCli, MalformedVariantNamesVariableValueAndAccepted) {
    const CliRun run = select("CULINA_VARIANT='cuda 13'", kManifests + "release-0.1.0.json");
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_NE(run.err.find("CULINA_VARIANT='cuda 13' is not understood; accepted: auto, source, null (alias cpu)"), std::string::npos)
        << run.err;
    EXPECT_TRUE(run.out.empty());
}

TEST_F(SelectCli, BadManifestNamesTheField) {
    std::ofstream(dir_ + "bad.json") << R"({"schema_version": 7, "name": "culina", "version": "0.1.0", "wheels": []})";
    const CliRun run = select("CULINA_OVERRIDE_SM=9.0 CULINA_OVERRIDE_CUDA=13.0", dir_ + "bad.json");
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_NE(run.err.find("schema_version: 7 is not supported"), std::string::npos) << run.err;
}

TEST_F(SelectCli, MissingOptionsAreAUsageError) {
    const std::string command = std::string("'") + CULINA_RESOLVER_EXE + "' select --manifest x >/dev/null 2>&1";
    const int status = std::system(command.c_str());
    EXPECT_EQ(WEXITSTATUS(status), 2);
}

}  // namespace
}  // namespace culina
