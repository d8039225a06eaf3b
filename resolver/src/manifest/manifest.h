// release-manifest.json: every fat wheel of a release and the facts the policy needs.
// The format is documented in SCHEMA.md beside this file.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cuda_version.h"
#include "common/error.h"

namespace culina {

inline constexpr int kManifestSchemaVersion = 1;
// A release manifest lists a few dozen wheels in some KiB (about 1 KiB a wheel); anything larger
// than this is not one, whether read from a file or fetched, and is refused unparsed.
inline constexpr std::uint64_t kManifestSizeLimit = 1u << 20;
// Objects and arrays inside each other: the schema needs 4 (document, wheels, a wheel, its
// lists); a deeper document is refused as soon as the parser sees it, so nesting costs no memory.
inline constexpr int kManifestDepthLimit = 16;

struct WheelEntry {
    std::string file;                  // culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl
    std::string sha256;                // 64 lowercase hex digits
    std::uint64_t size = 0;            // bytes
    std::vector<std::string> tags;     // as written, possibly compressed: "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64"
    std::string variant;               // "cu130", "cu129", "null"
    std::optional<CudaVersion> cuda;   // build CUDA version; nullopt for the CPU-only variant
    std::vector<std::string> sass;     // "sm_90", "sm_90a", "sm_120f", read from the binary
    std::vector<std::string> ptx;      // "compute_120"
    std::vector<std::string> variant_properties;  // "nvidia :: sm_arch :: 90_real"

    bool cpu_only() const { return !cuda.has_value(); }
};

struct Manifest {
    int schema_version = kManifestSchemaVersion;
    std::string name;     // project name, "culina"
    std::string version;  // "0.1.0"
    std::vector<WheelEntry> wheels;

    // Distinct variant labels in manifest order, e.g. {"cu130", "cu129", "null"}.
    std::vector<std::string> variant_labels() const;
};

// A manifest that does not follow the schema. what() reads
// "release manifest[ <source>]: <field>: <problem>", e.g. "release manifest: wheels[1].sha256: ...".
// Bad input to the commands that read a manifest; `manifest add` reports a refused write as failed.
struct ManifestError : Error {
    ManifestError(const std::string& field, const std::string& problem, const std::string& source = "");
    std::string field;    // JSON path of the offending value, "" when the whole document is at fault
    std::string problem;  // what is wrong with it and, where there is one, the expected form
};

// Throws ManifestError. The text is parsed as given: its readers (load_manifest,
// fetch::fetch_manifest_text) cap it at kManifestSizeLimit.
Manifest parse_manifest(const std::string& json_text);
// Reads at most kManifestSizeLimit bytes (a larger file, a pipe or a device that yields more is
// refused) and parses them. Throws ManifestError naming the path.
Manifest load_manifest(const std::string& path);

}  // namespace culina
