// Wheel file names and tags: "culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl".
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace culina {

// A wheel file name in the wheel-variant style:
// {distribution}-{version}[-{build}]-{python}-{abi}-{platform}-{variant}.whl
struct WheelFileName {
    std::string distribution;    // "culina" (as written in the file name)
    std::string version;         // "0.1.0"
    std::string build;           // "" when absent; starts with a digit otherwise
    std::string compressed_tag;  // "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64"
    std::string variant;         // "cu130"
};

// nullopt when `file` is not such a name (also for anything holding a path separator).
std::optional<WheelFileName> parse_wheel_filename(const std::string& file);

// A variant label: 1 to 16 of [0-9a-z._] (wheel-variant rule), e.g. "cu130", "null".
bool is_valid_variant_label(const std::string& label);

// "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64" -> every tag it stands for,
// {"cp312-cp312-manylinux_2_17_x86_64", "cp312-cp312-manylinux2014_x86_64"}, lowercased.
// nullopt when it is not three "-"-separated parts, each one or more "."-separated names.
std::optional<std::vector<std::string>> expand_compressed_tag(const std::string& tag);

}  // namespace culina
