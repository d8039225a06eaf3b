#include "probe/os_probe.h"

#include <glob.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <sstream>

#include "common/subprocess.h"
#include "common/text.h"

namespace culina {
namespace {

bool path_exists(const char* path) { return access(path, F_OK) == 0; }

std::optional<std::string> first_glob_match(const char* pattern) {
    glob_t matches{};
    std::optional<std::string> first;
    if (glob(pattern, 0, nullptr, &matches) == 0 && matches.gl_pathc > 0) first = matches.gl_pathv[0];
    globfree(&matches);
    return first;
}

LibcInfo probe_libc() {
#ifdef _CS_GNU_LIBC_VERSION
    char buffer[128] = {0};
    if (confstr(_CS_GNU_LIBC_VERSION, buffer, sizeof buffer) > 0) {
        if (std::optional<LibcInfo> glibc = parse_gnu_libc_version(buffer)) return *glibc;
    }
#endif
    if (std::optional<std::string> loader = first_glob_match("/lib/ld-musl-*.so.1")) {
        const ChildOutcome banner = run_command({*loader}, std::chrono::seconds(5));
        if (std::optional<LibcInfo> musl = parse_musl_loader_banner(banner.output)) return *musl;
        return {"musl", ""};
    }
    return {"", ""};
}

bool probe_container() {
    if (path_exists("/.dockerenv") || path_exists("/run/.containerenv")) return true;
    if (get_env("container") || get_env("KUBERNETES_SERVICE_HOST")) return true;
    const std::optional<std::string> cgroup = read_text_file("/proc/1/cgroup");
    return cgroup && cgroup_names_container(*cgroup);
}

}  // namespace

std::optional<LibcInfo> parse_gnu_libc_version(const std::string& text) {
    std::istringstream words(text);
    std::string name;
    std::string version;
    if (!(words >> name >> version) || name != "glibc") return std::nullopt;
    const std::vector<std::string> parts = split(version, '.');
    if (parts.size() < 2) return std::nullopt;
    for (const std::string& part : parts) {
        if (!parse_small_uint(part)) return std::nullopt;
    }
    return LibcInfo{"glibc", version};
}

std::optional<LibcInfo> parse_musl_loader_banner(const std::string& text) {
    if (text.find("musl libc") == std::string::npos) return std::nullopt;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        if (starts_with(line, "Version ")) return LibcInfo{"musl", printable(trim(line.substr(8)), kForeignTextLimit)};
    }
    return LibcInfo{"musl", ""};
}

bool kernel_release_is_wsl(const std::string& release) {
    return lowercase(release).find("microsoft") != std::string::npos;
}

bool cgroup_names_container(const std::string& cgroup_text) {
    for (const char* runtime : {"docker", "kubepods", "containerd", "libpod", "lxc"}) {
        if (cgroup_text.find(runtime) != std::string::npos) return true;
    }
    return false;
}

OsInfo probe_os() {
    OsInfo os;
    utsname names{};
    if (uname(&names) == 0) {
        os.system = printable(names.sysname, kForeignTextLimit);
        os.release = printable(names.release, kForeignTextLimit);
    }
    os.libc = probe_libc();
    os.wsl = kernel_release_is_wsl(os.release) || get_env("WSL_DISTRO_NAME").has_value() ||
             path_exists("/proc/sys/fs/binfmt_misc/WSLInterop");
    os.container = probe_container();
    return os;
}

}  // namespace culina
