// Wheel-variant properties ("nvidia :: sm_arch :: 90_real"): the manifest repeats the build
// facts in this form so that variant-aware installers can read them without culina's resolver.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/cuda_version.h"
#include "manifest/cuda_arch.h"

namespace culina {

struct VariantProperty {
    std::string name_space;  // "nvidia"
    std::string feature;     // "sm_arch"
    std::string value;       // "90_real"

    std::string str() const { return name_space + " :: " + feature + " :: " + value; }
};

// "nvidia :: sm_arch :: 90_real" -> VariantProperty; nullopt unless it is three non-empty parts
// joined by " :: ", namespace and feature of [a-z0-9_], the value without whitespace.
std::optional<VariantProperty> parse_variant_property(const std::string& text);

inline constexpr const char* kNvidiaPropertyNamespace = "nvidia";

// The nvidia properties a wheel built with `cuda` holding `archs` must declare:
// "nvidia :: cuda_version_lower_bound :: 13.0", "nvidia :: sm_arch :: 90_real" per SASS target,
// "nvidia :: sm_arch :: 120_virtual" per PTX target. Empty for the CPU-only variant.
std::vector<std::string> expected_nvidia_properties(const std::optional<CudaVersion>& cuda,
                                                    const std::vector<CudaArch>& archs);

}  // namespace culina
