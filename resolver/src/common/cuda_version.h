// A CUDA version (major.minor), as the driver, a toolkit or a wheel reports it.
#pragma once

#include <optional>
#include <string>

namespace culina {

struct CudaVersion {
    int major = 0;
    int minor = 0;

    // cuDriverGetVersion encodes 13.0 as 13000 and 12.9 as 12090.
    static CudaVersion from_driver_int(int encoded) { return {encoded / 1000, (encoded % 1000) / 10}; }

    std::string str() const { return std::to_string(major) + "." + std::to_string(minor); }

    friend bool operator==(const CudaVersion& a, const CudaVersion& b) { return a.major == b.major && a.minor == b.minor; }
    friend bool operator!=(const CudaVersion& a, const CudaVersion& b) { return !(a == b); }
    friend bool operator<(const CudaVersion& a, const CudaVersion& b) {
        return a.major != b.major ? a.major < b.major : a.minor < b.minor;
    }
    friend bool operator<=(const CudaVersion& a, const CudaVersion& b) { return !(b < a); }
    friend bool operator>(const CudaVersion& a, const CudaVersion& b) { return b < a; }
    friend bool operator>=(const CudaVersion& a, const CudaVersion& b) { return !(a < b); }
};

// "12.9", "13", "13.0.1" -> CudaVersion; nullopt for anything else.
std::optional<CudaVersion> parse_cuda_version(const std::string& text);

}  // namespace culina
