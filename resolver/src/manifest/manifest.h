// release-manifest.json: every fat wheel of a release and the facts the policy needs.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cuda_version.h"

namespace culina {

struct WheelEntry {
    std::string file;                  // culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl
    std::string sha256;                // 64 lowercase hex digits
    std::uint64_t size = 0;            // bytes
    std::vector<std::string> tags;     // "cp312-cp312-manylinux_2_28_x86_64"
    std::string variant;               // "cu130", "cu129", "null"
    std::optional<CudaVersion> cuda;   // build CUDA version; nullopt for the CPU-only variant
    std::vector<std::string> sass;     // "sm_90", "sm_90a", "sm_120f", read from the binary
    std::vector<std::string> ptx;      // "compute_120"
    std::vector<std::string> variant_properties;  // "nvidia :: sm_arch :: 90_real"
};

struct Manifest {
    int schema_version = 1;
    std::string name;     // project name, "culina"
    std::string version;  // "0.1.0"
    std::vector<WheelEntry> wheels;
};

// A manifest that does not follow the schema; what() names the field and the problem.
struct ManifestError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

Manifest parse_manifest(const std::string& json_text);  // throws ManifestError
Manifest load_manifest(const std::string& path);        // throws ManifestError

}  // namespace culina
