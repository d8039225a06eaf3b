#include "fetch/fetch_wheel.h"

#include "common/text.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <optional>

#include "fetch/fetch_error.h"
#include "fetch/http_download.h"
#include "common/sha256.h"
#include "fetch/wheel_cache.h"
#include "fetch/wheel_check.h"

namespace culina::fetch {
namespace {

void validate(const WheelExpectation& expected) {
    const std::string& file = expected.file;
    const bool safe_name = !file.empty() && file.front() != '.' && file.find('/') == std::string::npos &&
                           file.size() > 4 && ends_with(file, ".whl");
    if (!safe_name) {
        throw configuration_error("wheel file name '" + file + "' is not usable: expected a plain name ending in .whl");
    }
    const bool hex = expected.sha256.size() == 64 &&
                     std::all_of(expected.sha256.begin(), expected.sha256.end(), [](unsigned char c) { return std::isxdigit(c); });
    if (!hex) throw configuration_error("sha256 '" + expected.sha256 + "' for " + file + " is not 64 hex digits: fix the manifest");
    if (expected.size == 0) throw configuration_error("size 0 for " + file + ": fix the manifest");
    if (expected.project.empty() || expected.version.empty()) {
        throw configuration_error("no project name or version to check " + file + " against: fix the manifest");
    }
}

}  // namespace

std::optional<std::string> wheel_file_problem(const std::string& path, const WheelExpectation& expected) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) return "it cannot be read";
    if (static_cast<std::uint64_t>(info.st_size) != expected.size) {
        return "its size is " + std::to_string(info.st_size) + " bytes, the manifest says " + std::to_string(expected.size);
    }
    std::string digest;
    try {
        digest = sha256_file_hex(path);
    } catch (const std::runtime_error& error) {
        return error.what();
    }
    if (digest != lowercase(expected.sha256)) return "its sha256 is " + digest + ", the manifest says " + lowercase(expected.sha256);
    return wheel_metadata_problem(path, expected.project, expected.version);
}

std::string fetch_wheel(const WheelExpectation& expected, const FetchOptions& options) {
    validate(expected);
    const auto log = [&](const std::string& message) {
        if (options.log) options.log(message);
    };
    const CachePaths paths = cache_paths(options.settings.cache_root, expected.file);
    ensure_cache_directory(paths.directory);
    const CacheLock lock(paths.lock, [&] {
        log("another install is fetching " + expected.file + " into the same cache; waiting for it (lock " +
            paths.lock + ")");
    });

    struct stat info {};
    if (::stat(paths.wheel.c_str(), &info) == 0) {
        const std::optional<std::string> problem = wheel_file_problem(paths.wheel, expected);
        if (!problem) {
            log("using the cached " + paths.wheel + " (size, sha256 and METADATA verified)");
            return paths.wheel;
        }
        log("the cached " + paths.wheel + " fails verification (" + *problem + "): deleting it and downloading again");
        discard_file(paths.wheel);
    }
    if (options.settings.offline) {
        throw FetchError(FetchError::Kind::unavailable,
                         "CULINA_OFFLINE=1 and " + expected.file + " is not in the cache " + paths.directory +
                             ": unset CULINA_OFFLINE to download it, or put the verified wheel there");
    }

    const DownloadRequest request{expected.url,
                                  paths.part,
                                  expected.size,
                                  options.allow_http,
                                  options.settings.timeout_seconds,
                                  options.settings.retries,
                                  options.settings.ca_bundle,
                                  options.settings.ca_bundle_source};
    log("downloading " + expected.file + " (" + format_bytes(expected.size) + ") from " + expected.url);
    std::ostream& progress_out = options.progress_out != nullptr ? *options.progress_out : std::cerr;
    Progress progress(progress_out, options.progress_redraw, options.progress_interval, "culina: " + expected.file,
                      expected.size);
    try {
        const DownloadResult result = download(request, progress, log);
        if (result.sha256 != lowercase(expected.sha256)) {
            throw FetchError(FetchError::Kind::verification,
                             "the download of " + expected.file + " has sha256 " + result.sha256 +
                                 " but the manifest says " + lowercase(expected.sha256) +
                                 ": the release asset does not match the manifest (or was tampered with); "
                                 "deleted it, nothing is installed from it");
        }
        if (const auto problem = wheel_metadata_problem(paths.part, expected.project, expected.version)) {
            throw FetchError(FetchError::Kind::verification,
                             "the download of " + expected.file + " is not this project's wheel: " + *problem +
                                 "; deleted it, check the manifest and the base URL");
        }
        publish_file(paths.part, paths.wheel);
    } catch (...) {
        try {
            discard_file(paths.part);
        } catch (const FetchError& error) {
            log(error.what());
        }
        throw;
    }
    log("verified " + expected.file + " (size, sha256, METADATA " + expected.project + " " + expected.version +
        ") and stored it as " + paths.wheel);
    return paths.wheel;
}

}  // namespace culina::fetch
