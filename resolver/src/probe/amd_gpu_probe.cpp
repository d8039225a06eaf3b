#include "probe/amd_gpu_probe.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <system_error>

#include "common/text.h"

namespace culina {
namespace {

// As many nodes as the CUDA probe reads GPUs: a hostile or broken sysfs costs no more.
constexpr size_t kMaxNodes = 256;

std::optional<int> property(const std::string& text, const std::string& name) {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream words(line);
        std::string key, value, extra;
        if (words >> key >> value && key == name && !(words >> extra)) return parse_small_uint(value);
    }
    return std::nullopt;
}

}  // namespace

std::string gfx_target_name(unsigned version) {
    std::ostringstream name;
    name << "gfx" << version / 10000 << std::hex << (version / 100) % 100 << version % 100;
    return name.str();
}

std::optional<AmdGpuInfo> parse_kfd_node_properties(const std::string& text, int node) {
    const std::optional<int> simds = property(text, "simd_count");
    const std::optional<int> target = property(text, "gfx_target_version");
    if (!simds || *simds == 0 || !target || *target == 0) return std::nullopt;
    return AmdGpuInfo{node, gfx_target_name(static_cast<unsigned>(*target))};
}

std::vector<AmdGpuInfo> probe_amd_gpus(const std::string& nodes_dir) {
    std::vector<int> nodes;
    std::error_code error;
    for (std::filesystem::directory_iterator it(nodes_dir, error), end; !error && it != end && nodes.size() < kMaxNodes;
         it.increment(error)) {
        if (std::optional<int> node = parse_small_uint(it->path().filename().string())) nodes.push_back(*node);
    }
    std::sort(nodes.begin(), nodes.end());
    std::vector<AmdGpuInfo> gpus;
    for (int node : nodes) {
        const std::optional<std::string> text = read_text_file(nodes_dir + "/" + std::to_string(node) + "/properties");
        if (!text) continue;
        if (std::optional<AmdGpuInfo> gpu = parse_kfd_node_properties(*text, node)) gpus.push_back(*gpu);
    }
    return gpus;
}

}  // namespace culina
