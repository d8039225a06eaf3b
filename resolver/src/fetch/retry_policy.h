// Which failures are worth another attempt, and how long to wait before it.
#pragma once

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

}  // namespace culina::fetch
