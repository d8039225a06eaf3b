#include "policy/driver_compat.h"

#include "facts/cuda_facts.h"

namespace culina {

std::optional<std::string> minimum_linux_driver_for(int cuda_major) {
    const std::map<int, std::string>& minimums = cuda_facts().driver_minimum_linux;
    const auto found = minimums.find(cuda_major);
    if (found == minimums.end()) return std::nullopt;
    return found->second;
}

std::string describe_driver_needed_for(const CudaVersion& build) {
    std::string text = "a driver supporting CUDA >= " + CudaVersion{build.major, 0}.str();
    if (const std::optional<std::string> driver = minimum_linux_driver_for(build.major)) {
        text += " (NVIDIA driver >= " + *driver + ")";
    }
    return text;
}

}  // namespace culina
