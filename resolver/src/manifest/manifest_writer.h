// Writes release-manifest.json (fields in SCHEMA.md order). The release scripts use it through `culina-resolver manifest`,
// so writer and reader share one schema: every document written is read back by parse_manifest.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "manifest/manifest.h"

namespace culina {

nlohmann::ordered_json manifest_to_json(const Manifest& manifest);

// The entry for a built wheel file: name, size and sha256 from the file, tags and label from
// its name, properties from the CUDA version and the architectures read out of its binary.
// Throws ManifestError when the result would not parse (wrong project, unknown arch, ...).
WheelEntry wheel_entry_for(const std::string& wheel_path, const std::optional<CudaVersion>& cuda,
                           const std::vector<std::string>& sass, const std::vector<std::string>& ptx);

// Adds `entry` (replacing one with the same file name) and checks the whole result parses.
Manifest with_wheel(Manifest manifest, const WheelEntry& entry);

// Writes next to `path` and renames over it, so a reader never sees half a manifest.
void save_manifest(const Manifest& manifest, const std::string& path);

}  // namespace culina
