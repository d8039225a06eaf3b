// A GPU's compute capability (major.minor), e.g. 9.0 for Hopper.
#pragma once

#include <optional>
#include <string>

namespace culina {

struct ComputeCapability {
    int major = 0;
    int minor = 0;

    std::string str() const { return std::to_string(major) + "." + std::to_string(minor); }
    int as_int() const { return major * 10 + minor; }

    friend bool operator==(const ComputeCapability& a, const ComputeCapability& b) {
        return a.major == b.major && a.minor == b.minor;
    }
    friend bool operator!=(const ComputeCapability& a, const ComputeCapability& b) { return !(a == b); }
    friend bool operator<(const ComputeCapability& a, const ComputeCapability& b) { return a.as_int() < b.as_int(); }
};

// "9.0" or "90" or "120" -> ComputeCapability; nullopt for anything else.
std::optional<ComputeCapability> parse_compute_capability(const std::string& text);

}  // namespace culina
