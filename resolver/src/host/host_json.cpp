#include "host/host_json.h"

namespace culina {
namespace {

template <typename T>
nlohmann::json or_null(const std::optional<T>& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json host_to_json(const HostInfo& host) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuInfo& gpu : host.gpus) {
        gpus.push_back({{"index", gpu.index}, {"name", gpu.name}, {"sm", gpu.sm.str()}});
    }
    nlohmann::json amd_gpus = nlohmann::json::array();
    for (const AmdGpuInfo& gpu : host.amd_gpus) amd_gpus.push_back({{"node", gpu.node}, {"gfx", gpu.gfx}});
    return {
        {"os",
         {{"system", host.os.system},
          {"release", host.os.release},
          {"libc", {{"name", host.os.libc.name}, {"version", host.os.libc.version}}},
          {"wsl", host.os.wsl},
          {"container", host.os.container}}},
        {"cpu",
         {{"arch", host.cpu.arch},
          {"vendor", host.cpu.vendor},
          {"model", host.cpu.model},
          {"isa_level", host.cpu.isa_level},
          {"features", host.cpu.features},
          {"source", host.cpu.source}}},
        {"driver",
         {{"version", or_null(host.driver.version)},
          {"cuda", host.driver.cuda ? nlohmann::json(host.driver.cuda->str()) : nlohmann::json(nullptr)},
          {"source", host.driver.source}}},
        {"gpus", gpus},
        {"amd_gpus", amd_gpus},
        {"toolkit", host.toolkit ? nlohmann::json{{"nvcc", host.toolkit->nvcc}, {"cuda", host.toolkit->cuda.str()}}
                                 : nlohmann::json(nullptr)},
        {"overrides", host.overrides},
        {"errors", host.errors},
    };
}

std::string host_json_text(const nlohmann::json& document) {
    return document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace culina
