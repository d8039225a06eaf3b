#include "common/compute_capability.h"
#include "common/cuda_version.h"
#include "common/text.h"

namespace culina {

std::optional<CudaVersion> parse_cuda_version(const std::string& text) {
    const std::vector<std::string> parts = split(trim(text), '.');
    if (parts.empty() || parts.size() > 3) return std::nullopt;
    std::vector<int> numbers;
    for (const std::string& part : parts) {
        std::optional<int> n = parse_small_uint(part);
        if (!n) return std::nullopt;
        numbers.push_back(*n);
    }
    if (numbers[0] == 0) return std::nullopt;
    return CudaVersion{numbers[0], numbers.size() > 1 ? numbers[1] : 0};
}

std::optional<ComputeCapability> parse_compute_capability(const std::string& raw) {
    const std::string text = trim(raw);
    const std::vector<std::string> parts = split(text, '.');
    if (parts.size() == 2) {
        std::optional<int> major = parse_small_uint(parts[0]);
        std::optional<int> minor = parse_small_uint(parts[1]);
        if (!major || !minor || *major == 0 || *minor > 9) return std::nullopt;
        return ComputeCapability{*major, *minor};
    }
    // Compact form: the last digit is the minor ("90" -> 9.0, "120" -> 12.0).
    if (parts.size() == 1 && text.size() >= 2 && text.size() <= 3) {
        std::optional<int> whole = parse_small_uint(text);
        if (!whole || *whole < 10) return std::nullopt;
        return ComputeCapability{*whole / 10, *whole % 10};
    }
    return std::nullopt;
}

}  // namespace culina
