// The NVIDIA kernel module's version, from the files the module publishes.
#pragma once

#include <optional>
#include <string>

namespace culina {

// /sys/module/nvidia/version holds just "580.159.04\n".
std::optional<std::string> parse_nvidia_module_version(const std::string& text);
// /proc/driver/nvidia/version: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu ...".
std::optional<std::string> parse_proc_driver_version(const std::string& text);

struct DriverVersionReading {
    std::optional<std::string> version;
    std::string source;  // the file it came from, or "" when none had it
};

// Ordered sources: sysfs first (cheapest, present in containers), then procfs.
DriverVersionReading read_driver_version();

}  // namespace culina
