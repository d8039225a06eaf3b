#include "policy/decision.h"

namespace culina {
namespace {

nlohmann::json version_or_null(const std::optional<CudaVersion>& version) {
    return version ? nlohmann::json(version->str()) : nlohmann::json(nullptr);
}

nlohmann::json text_or_null(const std::optional<std::string>& text) {
    return text ? nlohmann::json(*text) : nlohmann::json(nullptr);
}

// The toolkit root: the folder above nvcc's bin/ (the probe's path is canonical, <root>/bin/nvcc).
std::string toolkit_root(const std::string& nvcc) {
    const size_t bin = nvcc.rfind('/', nvcc.rfind('/') - 1);
    return bin == std::string::npos || bin == 0 ? "/" : nvcc.substr(0, bin);
}

}  // namespace

const char* action_name(Action action) {
    switch (action) {
        case Action::install_wheel: return "install_wheel";
        case Action::build_local: return "build_local";
        case Action::build_cpu: return "build_cpu";
        case Action::error: return "error";
    }
    return "error";
}

nlohmann::json decision_to_json(const Decision& decision) {
    nlohmann::json out;
    out["schema_version"] = kDecisionSchemaVersion;
    out["action"] = action_name(decision.action);
    out["reason"] = decision.reason;
    if (decision.wheel) {
        const WheelEntry& wheel = *decision.wheel;
        out["wheel"] = {{"file", wheel.file},         {"sha256", wheel.sha256}, {"size", wheel.size},
                        {"variant", wheel.variant},   {"cuda", version_or_null(wheel.cuda)},
                        {"tags", wheel.tags},         {"sass", wheel.sass},     {"ptx", wheel.ptx}};
    } else {
        out["wheel"] = nullptr;
    }
    out["variant_request"] = decision.variant_request;
    out["assumption"] = text_or_null(decision.assumption);
    out["override_hint"] = text_or_null(decision.override_hint);
    out["warnings"] = decision.warnings;
    out["local_build_archs"] = decision.local_build_archs;
    out["pypi_toolkit"] = version_or_null(decision.pypi_toolkit);
    out["build_toolkit"] = nullptr;
    if (decision.build_toolkit) {
        const ToolkitInfo& toolkit = *decision.build_toolkit;
        out["build_toolkit"] = {{"nvcc", toolkit.nvcc},
                                {"root", toolkit_root(toolkit.nvcc)},
                                {"cuda", toolkit.cuda.str()},
                                {"found_in", toolkit.found_in}};
    }
    out["host"] = {{"driver_cuda", version_or_null(decision.host.driver_cuda)},
                   {"gpus", decision.host.gpus},
                   {"toolkit_cuda", version_or_null(decision.host.toolkit_cuda)}};
    out["candidates"] = nlohmann::json::array();
    for (const Candidate& candidate : decision.candidates) {
        out["candidates"].push_back({{"file", candidate.file},
                                     {"variant", candidate.variant},
                                     {"cuda", version_or_null(candidate.cuda)},
                                     {"tag_rank", candidate.tag_rank ? nlohmann::json(*candidate.tag_rank) : nlohmann::json(nullptr)},
                                     {"accepted", candidate.accepted},
                                     {"chosen", candidate.chosen},
                                     {"reason", candidate.reason}});
    }
    return out;
}

}  // namespace culina
