// Is this file the wheel we expect? A zip with exactly one top-level `*.dist-info/METADATA`
// whose Name and Version are the project's. Catches a manifest or mirror that points at
// another project's or another release's file even when its digest was recorded for it.
#pragma once

#include <optional>
#include <string>

namespace culina::fetch {

struct MetadataFields {
    std::string name;
    std::string version;
};

// The Name and Version headers of a core-metadata file (the header block before the first
// blank line); empty strings for missing ones.
MetadataFields parse_metadata_fields(const std::string& text);

// nullopt when the wheel open as `fd` matches (read through that descriptor, so that what was
// checked is what is used); otherwise what is wrong with it, in words.
std::optional<std::string> wheel_metadata_problem(int fd, const std::string& project, const std::string& version);

}  // namespace culina::fetch
