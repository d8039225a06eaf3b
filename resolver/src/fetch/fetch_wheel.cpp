#include "fetch/fetch_wheel.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <optional>

#include "common/sha256.h"
#include "common/text.h"
#include "fetch/fetch_error.h"
#include "fetch/http_download.h"
#include "fetch/local_copy.h"
#include "fetch/release_location.h"
#include "fetch/url_policy.h"
#include "fetch/wheel_cache.h"
#include "fetch/wheel_check.h"

namespace culina::fetch {
namespace {

using Logger = std::function<void(const std::string&)>;

void validate(const WheelExpectation& expected) {
    const std::string& file = expected.file;
    const bool safe_name = !file.empty() && file.front() != '.' && file.find('/') == std::string::npos &&
                           file.size() > 4 && ends_with(file, ".whl");
    if (!safe_name) {
        throw configuration_error("wheel file name '" + printable(file) +
                                  "' is not usable: expected a plain name ending in .whl");
    }
    const bool hex = expected.sha256.size() == 64 &&
                     std::all_of(expected.sha256.begin(), expected.sha256.end(), [](unsigned char c) { return std::isxdigit(c); });
    if (!hex) throw configuration_error("sha256 '" + printable(expected.sha256) + "' for " + file + " is not 64 hex digits: fix the manifest");
    if (expected.size == 0) throw configuration_error("size 0 for " + file + ": fix the manifest");
    if (expected.project.empty() || expected.version.empty()) {
        throw configuration_error("no project name or version to check " + file + " against: fix the manifest");
    }
}

// A link, someone else's file or a hard link where the cache expects its own file was planted:
// it is removed (the entry itself, never what it points to) before anything is opened there.
void remove_planted_entry(const std::string& path, const Logger& log) {
    if (const auto problem = untrusted_entry_problem(path)) {
        log("WARNING: " + path + " is not a file this cache wrote (" + *problem + "): removing it");
        discard_file(path);
    }
}

// nullopt when the wheel open as `fd` has the expected size, digest and METADATA, all read through
// that one descriptor; otherwise the problem.
std::optional<std::string> wheel_problem(int fd, const WheelExpectation& expected) {
    struct stat info {};
    if (::fstat(fd, &info) != 0) return std::string("it cannot be examined: ") + std::strerror(errno);
    if (static_cast<std::uint64_t>(info.st_size) != expected.size) {
        return "its size is " + std::to_string(info.st_size) + " bytes, the manifest says " + std::to_string(expected.size);
    }
    std::string digest;
    try {
        digest = sha256_descriptor_hex(fd);
    } catch (const std::runtime_error& error) {
        return error.what();
    }
    if (digest != lowercase(expected.sha256)) return "its sha256 is " + digest + ", the manifest says " + lowercase(expected.sha256);
    return wheel_metadata_problem(fd, expected.project, expected.version);
}

std::optional<std::string> verified_cached_wheel(const CachePaths& paths, const WheelExpectation& expected,
                                                 const Logger& log) {
    remove_planted_entry(paths.wheel, log);
    struct stat info {};
    if (::lstat(paths.wheel.c_str(), &info) != 0) return std::nullopt;
    std::optional<std::string> problem;
    try {
        const Descriptor wheel(open_own_file(paths.wheel, O_RDONLY, false));
        problem = wheel_problem(wheel.get(), expected);
    } catch (const FetchError& error) {
        problem = error.what();
    }
    if (!problem) {
        log("using the cached " + paths.wheel + " (size, sha256 and METADATA verified)");
        return paths.wheel;
    }
    log(paths.wheel + " fails verification (" + *problem + "): deleting it and fetching again");
    discard_file(paths.wheel);
    return std::nullopt;
}

// The part file against the manifest: first the digest of the bytes as they arrived, then the file
// that is renamed into place, read through one descriptor. Throws FetchError(verification)
// naming the problem.
void verify_part(const CachePaths& paths, const WheelExpectation& expected, const std::string& arrived_sha256) {
    if (arrived_sha256 != lowercase(expected.sha256)) {
        throw FetchError(FetchError::Kind::verification,
                         "the download of " + expected.file + " has sha256 " + arrived_sha256 + " but the manifest says " +
                             lowercase(expected.sha256) +
                             ": the release asset does not match the manifest (or was tampered with); "
                             "deleted it, nothing is installed from it");
    }
    const Descriptor part(open_own_file(paths.part, O_RDONLY, false));
    if (const auto problem = wheel_problem(part.get(), expected)) {
        throw FetchError(FetchError::Kind::verification, "the download of " + expected.file + " (" + paths.part +
                                                             ") fails verification: " + *problem +
                                                             "; deleted it, check the manifest and the base URL");
    }
}

// Downloads (or copies) into paths.part, verifies and renames it to paths.wheel. A part file
// left by an earlier run is resumed; when the result then fails verification, that prefix may
// have been the bad part, so it is discarded and the whole asset fetched once more.
void fetch_into(const CachePaths& paths, const WheelExpectation& expected, const FetchOptions& options,
                const Logger& log) {
    remove_planted_entry(paths.part, log);
    const std::optional<std::string> local = local_asset_path(expected.url);
    log((local ? "copying " : "downloading ") + expected.file + " (" + format_bytes(expected.size) + ") from " +
        redacted_url(expected.url));
    std::ostream& progress_out = options.progress_out != nullptr ? *options.progress_out : std::cerr;
    for (int round = 1;; ++round) {
        struct stat left_over {};
        const bool resuming = !local && ::lstat(paths.part.c_str(), &left_over) == 0 && left_over.st_size > 0;
        try {
            DownloadResult result;
            if (local) {
                result = copy_local_asset(*local, paths.part, expected.size, options.settings.names);
            } else {
                const DownloadRequest request{expected.url,
                                              paths.part,
                                              expected.size,
                                              options.allow_http,
                                              options.settings.timeout_seconds,
                                              options.settings.retries,
                                              options.settings.min_rate_kib,
                                              options.settings.ca_bundle,
                                              options.settings.ca_bundle_source,
                                              options.settings.names};
                Progress progress(progress_out, options.progress_redraw, options.progress_interval,
                                  options.settings.names.caller() + ": " + expected.file, expected.size);
                result = download(request, progress, log);
            }
            verify_part(paths, expected, result.sha256);
            publish_file(paths.part, paths.wheel);
            return;
        } catch (const FetchError& error) {
            const bool retry = round == 1 && resuming && error.kind == FetchError::Kind::verification;
            try {
                discard_file(paths.part);
            } catch (const FetchError& cleanup) {
                log(cleanup.what());
            }
            if (!retry) throw;
            log("the partial download an earlier run left (" + paths.part + ") did not verify (" + error.what() +
                "): discarded it, downloading the whole asset once more");
        }
    }
}

}  // namespace

void fetch_into_folder(const std::string& directory, const WheelExpectation& expected, const FetchOptions& options) {
    validate(expected);
    const Logger log = [&](const std::string& message) {
        if (options.log) options.log(message);
    };
    const CachePaths paths = paths_in(directory, expected.file);
    if (verified_cached_wheel(paths, expected, log)) return;
    fetch_into(paths, expected, options, log);
    log("verified " + expected.file + " and stored it as " + paths.wheel);
}

FetchedWheel fetch_wheel(const WheelExpectation& expected, const FetchOptions& options) {
    validate(expected);
    const Logger log = [&](const std::string& message) {
        if (options.log) options.log(message);
    };
    const SettingNames& names = options.settings.names;
    const bool local = local_asset_path(expected.url).has_value();
    const CachePaths paths = cache_paths(options.settings.cache_root, expected.file);
    const std::optional<std::string> untrusted = cache_root_problem(options.settings.cache_root);
    if (!untrusted) {
        // No lock for a hit: only verified files are renamed into place, and a rename is atomic.
        if (const auto cached = verified_cached_wheel(paths, expected, log)) return {*cached, std::nullopt};
    }
    if (options.settings.offline && !local) {
        throw FetchError(FetchError::Kind::unavailable,
                         names.of("OFFLINE") + "=1 and " + expected.file + " is not in the cache " + paths.directory +
                             (untrusted ? " (not used: " + *untrusted + ")" : "") +
                             ": unset " + names.of("OFFLINE") + " to download it, or point " + names.of("RELEASE_URL") +
                             " to a local release folder that holds it");
    }
    if (!untrusted) {
        remove_planted_entry(paths.lock, log);
        const int wait_seconds = options.settings.timeout_seconds;
        const CacheLock lock(paths.lock, std::chrono::seconds(wait_seconds), [&] {
            log("another install is fetching " + expected.file + " into the same cache; waiting for it (at most " +
                std::to_string(wait_seconds) + " s, " + names.of("TIMEOUT") + "; lock " + paths.lock + ")");
        });
        if (lock.held()) {
            if (const auto cached = verified_cached_wheel(paths, expected, log)) return {*cached, std::nullopt};
            fetch_into(paths, expected, options, log);
            log("verified " + expected.file + " (size, sha256, METADATA " + expected.project + " " + expected.version +
                ") and stored it as " + paths.wheel);
            return {paths.wheel, std::nullopt};
        }
        log("the cache lock " + paths.lock + " is still held after " + std::to_string(wait_seconds) +
            " s: going on without the cache, in a private temporary folder");
    } else {
        log("WARNING: not using the wheel cache: " + *untrusted +
            ". Fetching into a private temporary folder instead; to use a cache, set " + names.of("CACHE_DIR") +
            " to a folder that only you own and may write, under folders only you or root may write");
    }
    const std::string private_folder = make_private_folder(names.caller() + "-wheel");
    const CachePaths private_paths = cache_paths(private_folder, expected.file);
    fetch_into(private_paths, expected, options, log);
    log("verified " + expected.file + " (size, sha256, METADATA " + expected.project + " " + expected.version +
        ") in the private folder " + private_paths.directory);
    return {private_paths.wheel, private_folder};
}

}  // namespace culina::fetch
