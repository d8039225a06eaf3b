// The verified fetch: a wheel from the cache when a verified copy is there, otherwise downloaded
// (or copied from a local release folder) next to it, checked (size, sha256, zip with this
// project's METADATA) and renamed into place. A file that fails any check is deleted and never
// returned. A cache that cannot be trusted (wheel_cache.h), or whose lock stays held, is left
// alone: the wheel is then fetched into a private temporary folder.
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
    std::string url;      // where to download it from: an http(s) URL, or a local file (release_location.h)
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

struct FetchedWheel {
    std::string path;               // the verified wheel
    // Fetched outside the cache: the private folder it lies in, which whoever uses the wheel removes afterwards.
    std::optional<std::string> private_folder;
};

// Throws FetchError.
FetchedWheel fetch_wheel(const WheelExpectation& expected, const FetchOptions& options);

// Fetches the asset into <directory>/<file> through <file>.part, which is resumed when an earlier
// run left one, and verifies it before the rename, as fetch_wheel does in the cache; a file that
// is already there and verifies is kept. For `culina-resolver mirror`. Throws FetchError.
void fetch_into_folder(const std::string& directory, const WheelExpectation& expected, const FetchOptions& options);

}  // namespace culina::fetch
