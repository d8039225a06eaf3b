#include "host/host_table.h"

#include <iomanip>
#include <sstream>

namespace culina {
namespace {

std::string or_none(const std::string& text) { return text.empty() ? "(unknown)" : text; }

std::string joined(const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& item : items) out += (out.empty() ? "" : " ") + item;
    return out.empty() ? "(none)" : out;
}

}  // namespace

std::string host_to_table(const HostInfo& host) {
    std::ostringstream out;
    auto row = [&out](const std::string& key, const std::string& value) {
        out << "  " << std::left << std::setw(10) << key << value << "\n";
    };
    out << "host\n";
    row("os", or_none(host.os.system) + " " + host.os.release + (host.os.wsl ? " (WSL)" : "") +
                  (host.os.container ? " (container)" : ""));
    row("libc", host.os.libc.name.empty() ? "(unknown)" : host.os.libc.name + " " + host.os.libc.version);
    row("cpu", or_none(host.cpu.arch) + ", " + or_none(host.cpu.vendor) + ", " + or_none(host.cpu.model));
    row("isa", or_none(host.cpu.isa_level) + "  [" + joined(host.cpu.features) + "] from " + host.cpu.source);
    row("driver", (host.driver.version ? *host.driver.version : std::string("(none)")) + ", CUDA " +
                      (host.driver.cuda ? host.driver.cuda->str() : std::string("(none)")) +
                      (host.driver.source.empty() ? "" : "  from " + host.driver.source));
    if (host.gpus.empty()) row("gpus", "(none visible)");
    for (const GpuInfo& gpu : host.gpus) {
        row("gpu " + std::to_string(gpu.index), gpu.name + ", sm " + gpu.sm.str());
    }
    for (const AmdGpuInfo& gpu : host.amd_gpus) {
        row("amd gpu", "node " + std::to_string(gpu.node) + ", " + gpu.gfx + " (no ROCm build: not served)");
    }
    row("toolkit", host.toolkit ? "CUDA " + host.toolkit->cuda.str() + " (" + host.toolkit->nvcc + ")" : "(none)");
    if (!host.overrides.empty()) row("overrides", joined(host.overrides));
    for (const std::string& error : host.errors) row("error", error);
    return out.str();
}

}  // namespace culina
