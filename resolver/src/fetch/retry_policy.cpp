#include "fetch/retry_policy.h"

#include <algorithm>
#include <cmath>

#include "fetch/curl_library.h"

namespace culina::fetch {

double backoff_seconds(int retry, double unit_random) {
    constexpr double kFirstDelay = 1.0;
    constexpr double kLongestDelay = 30.0;
    const double base = std::min(kLongestDelay, kFirstDelay * std::ldexp(1.0, std::clamp(retry, 1, 16) - 1));
    return base * (0.5 + 0.5 * std::clamp(unit_random, 0.0, 1.0));
}

bool is_transient_http_status(long status) { return status >= 500 || status == 408 || status == 429; }

bool is_transient_curl_code(int code) {
    switch (code) {
        case curl::COULDNT_RESOLVE_PROXY:
        case curl::COULDNT_RESOLVE_HOST:
        case curl::COULDNT_CONNECT:
        case curl::HTTP2:
        case curl::PARTIAL_FILE:
        case curl::OPERATION_TIMEDOUT:
        case curl::SSL_CONNECT_ERROR:
        case curl::GOT_NOTHING:
        case curl::SEND_ERROR:
        case curl::RECV_ERROR:
        case curl::HTTP2_STREAM:
            return true;
        default:
            return false;
    }
}

double download_deadline_seconds(std::uint64_t size, int timeout_seconds, int min_rate_kib) {
    return timeout_seconds + static_cast<double>(size) / (1024.0 * std::max(min_rate_kib, 1));
}

}  // namespace culina::fetch
