// One asset over HTTP(S) into a part file: redirects checked hop by hop, a stall timeout per
// attempt, retries with backoff for transient failures only, Range to resume what a broken
// attempt left, and one deadline for all of it. The bytes are hashed as they arrive.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/setting_names.h"
#include "fetch/progress.h"

namespace culina::fetch {

struct DownloadRequest {
    std::string url;
    std::string part_path;  // resumed when it already holds a prefix (an interrupted earlier run)
    std::uint64_t expected_size = 0;
    bool allow_http = false;
    // The fetch settings' (FetchSettings) values, which the settings table's rows fill.
    int timeout_seconds = 0;
    int retries = 0;
    // KiB/s: the whole download, retries included, ends after timeout_seconds plus expected_size at
    // this rate (retry_policy.h, download_deadline_seconds).
    int min_rate_kib = 0;
    std::string ca_bundle;         // empty: libcurl's default store
    std::string ca_bundle_source;  // variable that named it
    SettingNames names;            // for messages naming the settings
    // expected_size is only an upper bound (a release manifest, whose size nobody promised): the
    // body may be any length up to it, and every attempt starts over instead of resuming.
    bool size_is_limit = false;
};

struct DownloadResult {
    std::string sha256;          // of the part file, which holds exactly expected_size bytes (at most, with size_is_limit)
    std::uint64_t received = 0;  // bytes transferred over the network by this call
    int attempts = 0;
};

using Log = std::function<void(const std::string&)>;

// Throws FetchError: network (gave up, past the deadline, or a permanent HTTP/TLS failure),
// verification (the server's bytes cannot be the asset: too many, too few), local (cannot write),
// configuration (URL refused by the policy). The part file is left as it is; the caller deletes it
// on failure.
DownloadResult download(const DownloadRequest& request, Progress& progress, const Log& log);

}  // namespace culina::fetch
