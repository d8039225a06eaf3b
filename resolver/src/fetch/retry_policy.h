// Which failures are worth another attempt, how long to wait before it, and how long a whole
// download may take.
#pragma once

#include <cstdint>

namespace culina::fetch {

// Delay before retry number `retry` (1 for the first retry): 1 s doubling per retry, at most
// 30 s, scaled by a jitter factor in [0.5, 1) from `unit_random` in [0, 1) so that several
// installs failing together do not retry in lockstep.
double backoff_seconds(int retry, double unit_random);

// 5xx, 408 (request timeout) and 429 (too many requests) may pass; other statuses will not.
bool is_transient_http_status(long status);

// libcurl result codes for a connection that failed or broke (refused, reset, timed out,
// cut short); certificate, protocol and local errors are permanent.
bool is_transient_curl_code(int code);

// Seconds a whole download of `size` bytes may take, every attempt, resume and backoff included:
// TIMEOUT's seconds (room for one slow connect or stall) plus the size at the slowest average rate
// accepted, MIN_RATE KiB/s (at least 1). A double, so that no size overflows it.
double download_deadline_seconds(std::uint64_t size, int timeout_seconds, int min_rate_kib);

}  // namespace culina::fetch
