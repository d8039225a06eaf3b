#include "probe/toolkit_probe.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>

#include "common/subprocess.h"
#include "common/text.h"

namespace culina {
namespace {

constexpr std::chrono::seconds kNvccLimit{15};

bool is_executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

std::string canonical(const std::string& path) {
    char resolved[PATH_MAX];
    return realpath(path.c_str(), resolved) ? std::string(resolved) : path;
}

struct NvccCandidate {
    std::string path;
    std::string found_in;  // ToolkitInfo::found_in
};

// A build with no decision searches in the same order (cuda_build_ext.TOOLKIT_SEARCH); a build
// with one compiles with the toolkit it names.
std::vector<NvccCandidate> nvcc_candidates(const std::optional<std::string>& pypi_root) {
    std::vector<NvccCandidate> candidates;
    for (const char* root_variable : {"CUDA_HOME", "CUDA_PATH"}) {
        const std::optional<std::string> root = get_env(root_variable);
        if (root && !root->empty()) candidates.push_back({*root + "/bin/nvcc", root_variable});
    }
    if (const std::optional<std::string> path = get_env("PATH")) {
        for (const std::string& dir : split(*path, ':')) {
            if (!dir.empty()) candidates.push_back({dir + "/nvcc", "PATH"});
        }
    }
    if (pypi_root) candidates.push_back({*pypi_root + "/bin/nvcc", "PyPI packages"});
    candidates.push_back({"/usr/local/cuda/bin/nvcc", "/usr/local/cuda"});
    return candidates;
}

}  // namespace

std::optional<CudaVersion> parse_nvcc_version(const std::string& text) {
    const std::string marker = "release ";
    const size_t at = text.find(marker);
    if (at == std::string::npos) return std::nullopt;
    const size_t begin = at + marker.size();
    const size_t end = text.find_first_of(", \n", begin);
    return parse_cuda_version(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
}

std::optional<ToolkitInfo> probe_toolkit(const std::optional<std::string>& pypi_root, std::vector<std::string>& errors) {
    for (const auto& [candidate, found_in] : nvcc_candidates(pypi_root)) {
        if (!is_executable(candidate)) continue;
        const std::string shown = printable(candidate);
        // The path goes into the decision, which the build reads back to run this nvcc: one
        // that only a sanitised copy of could be shown would name another file there.
        const std::string nvcc = canonical(candidate);
        if (shown != candidate || printable(nvcc) != nvcc) {
            errors.push_back("toolkit: '" + shown + "' (" + printable(nvcc) +
                             ") has control characters or bytes that are not UTF-8 in its path; skipped "
                             "(install the toolkit under a plain path, or set CUDA_HOME to one)");
            continue;
        }
        const ChildOutcome outcome = run_command({candidate, "--version"}, kNvccLimit);
        if (outcome.status != ChildOutcome::Status::exited || outcome.exit_code != 0) {
            errors.push_back("toolkit: '" + candidate + " --version' " + outcome.describe() + "; skipped");
            continue;
        }
        if (const std::optional<CudaVersion> version = parse_nvcc_version(outcome.output)) {
            return ToolkitInfo{nvcc, *version, found_in};
        }
        errors.push_back("toolkit: '" + candidate + " --version' printed no 'release X.Y'; skipped");
    }
    return std::nullopt;
}

}  // namespace culina
