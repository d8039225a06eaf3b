// Operating system facts: kernel, C library, WSL and container hints.
#pragma once

#include <optional>
#include <string>

#include "host/host_info.h"

namespace culina {

// confstr(_CS_GNU_LIBC_VERSION) text, "glibc 2.36" -> {glibc, 2.36}.
std::optional<LibcInfo> parse_gnu_libc_version(const std::string& text);
// What musl's dynamic loader prints when run bare: "musl libc (x86_64)\nVersion 1.2.4\n...".
std::optional<LibcInfo> parse_musl_loader_banner(const std::string& text);
// WSL kernels carry "microsoft" in their release ("5.15.153.1-microsoft-standard-WSL2").
bool kernel_release_is_wsl(const std::string& release);
// /proc/1/cgroup of a containerised process names its runtime.
bool cgroup_names_container(const std::string& cgroup_text);

OsInfo probe_os();

}  // namespace culina
