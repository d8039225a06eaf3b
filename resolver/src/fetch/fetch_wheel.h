// The verified fetch: a wheel from the cache when a verified copy is there, otherwise downloaded
// next to it, checked (size, sha256, zip with this project's METADATA) and renamed into place.
// A file that fails any check is deleted and never returned.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "fetch/fetch_settings.h"

namespace culina::fetch {

// What the manifest promises about one asset.
struct WheelExpectation {
    std::string url;      // where to download it from
    std::string file;     // the cache file name (the release asset's name)
    std::string sha256;   // 64 hex digits
    std::uint64_t size = 0;
    std::string project;  // METADATA Name
    std::string version;  // METADATA Version
};

struct FetchOptions {
    FetchSettings settings;
    bool allow_http = false;  // plain http beyond loopback: the expectations came from a trusted sdist
    std::function<void(const std::string&)> log;
    std::ostream* progress_out = nullptr;  // usually std::cerr
    bool progress_redraw = false;          // progress_out is a terminal
    double progress_interval = 3.0;        // seconds between progress lines when not redrawing
};

// Returns the path of the verified wheel in the cache. Throws FetchError.
std::string fetch_wheel(const WheelExpectation& expected, const FetchOptions& options);

// nullopt when the file at `path` has the expected size, digest and METADATA; else the problem.
std::optional<std::string> wheel_file_problem(const std::string& path, const WheelExpectation& expected);

}  // namespace culina::fetch
