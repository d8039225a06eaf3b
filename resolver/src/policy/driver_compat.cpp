#include "policy/driver_compat.h"

namespace culina {

std::optional<std::string> minimum_linux_driver_for(int cuda_major) {
    switch (cuda_major) {
        case 11: return "450.80.02";
        case 12: return "525.60.13";
        case 13: return "580";
        default: return std::nullopt;
    }
}

std::string describe_driver_needed_for(const CudaVersion& build) {
    std::string text = "a driver supporting CUDA >= " + CudaVersion{build.major, 0}.str();
    if (const std::optional<std::string> driver = minimum_linux_driver_for(build.major)) {
        text += " (NVIDIA driver >= " + *driver + ")";
    }
    return text;
}

}  // namespace culina
