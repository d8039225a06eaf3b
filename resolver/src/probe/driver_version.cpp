#include "probe/driver_version.h"

#include <sstream>
#include <vector>

#include "common/text.h"

namespace culina {
namespace {

// A driver version is dot-separated numbers, e.g. 580.159.04 or 535.54.
bool looks_like_driver_version(const std::string& word) {
    const std::vector<std::string> parts = split(word, '.');
    if (parts.size() < 2 || parts.size() > 3) return false;
    for (const std::string& part : parts) {
        if (!parse_small_uint(part)) return false;
    }
    return true;
}

}  // namespace

std::optional<std::string> parse_nvidia_module_version(const std::string& text) {
    const std::string word = trim(text);
    if (!looks_like_driver_version(word)) return std::nullopt;
    return word;
}

std::optional<std::string> parse_proc_driver_version(const std::string& text) {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        if (!starts_with(line, "NVRM version:")) continue;
        const size_t module = line.find("Kernel Module");
        std::istringstream words(module == std::string::npos ? line : line.substr(module));
        std::string word;
        while (words >> word) {
            if (looks_like_driver_version(word)) return word;
        }
    }
    return std::nullopt;
}

DriverVersionReading read_driver_version() {
    const struct {
        const char* path;
        std::optional<std::string> (*parse)(const std::string&);
    } sources[] = {
        {"/sys/module/nvidia/version", parse_nvidia_module_version},
        {"/proc/driver/nvidia/version", parse_proc_driver_version},
    };
    for (const auto& source : sources) {
        const std::optional<std::string> text = read_text_file(source.path);
        if (!text) continue;
        if (std::optional<std::string> version = source.parse(*text)) return {version, source.path};
    }
    return {std::nullopt, ""};
}

}  // namespace culina
