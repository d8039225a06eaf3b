#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "fetch/curl_library.h"
#include "fetch/retry_policy.h"
#include "fetch/url_policy.h"

namespace culina::fetch {
namespace {

TEST(Backoff, DoublesFromOneSecondUpToThirty) {
    EXPECT_DOUBLE_EQ(backoff_seconds(1, 0.999999), 1.0 * (0.5 + 0.5 * 0.999999));
    EXPECT_DOUBLE_EQ(backoff_seconds(1, 0.0), 0.5);
    EXPECT_DOUBLE_EQ(backoff_seconds(2, 0.0), 1.0);
    EXPECT_DOUBLE_EQ(backoff_seconds(3, 0.0), 2.0);
    EXPECT_DOUBLE_EQ(backoff_seconds(5, 0.0), 8.0);
    EXPECT_DOUBLE_EQ(backoff_seconds(6, 0.0), 15.0);  // 32 capped to 30, times 0.5
    EXPECT_DOUBLE_EQ(backoff_seconds(20, 0.0), 15.0);
}

TEST(Backoff, JitterStaysWithinHalfToFullDelay) {
    for (int retry = 1; retry <= 8; ++retry) {
        const double low = backoff_seconds(retry, 0.0);
        const double high = backoff_seconds(retry, 0.9999);
        EXPECT_LT(low, high);
        EXPECT_GE(low * 2, high);
        EXPECT_LE(high, 30.0);
    }
    // Out-of-range randomness is clamped, never a negative or huge delay.
    EXPECT_DOUBLE_EQ(backoff_seconds(1, -5), 0.5);
    EXPECT_DOUBLE_EQ(backoff_seconds(1, 7), 1.0);
}

TEST(DownloadDeadline, IsTheTimeoutPlusTheSizeAtTheSlowestRate) {
    EXPECT_DOUBLE_EQ(download_deadline_seconds(64 * 1024, 5, 2), 37.0);   // the trickle of issue 22: 5 s + 32 s
    EXPECT_DOUBLE_EQ(download_deadline_seconds(0, 30, 32), 30.0);
    EXPECT_DOUBLE_EQ(download_deadline_seconds(1 << 20, 30, 32), 62.0);   // the manifest's cap at the default
    EXPECT_DOUBLE_EQ(download_deadline_seconds(50'000'000, 30, 32), 30.0 + 50'000'000.0 / 32768);
    EXPECT_DOUBLE_EQ(download_deadline_seconds(3 << 19, 1, 1 << 20), 1.0 + 1.5 / 1024);
}

TEST(DownloadDeadline, NeitherOverflowsNorDividesByZero) {
    const double largest = download_deadline_seconds(UINT64_MAX, 3600, 1);
    EXPECT_TRUE(std::isfinite(largest));
    EXPECT_NEAR(largest, 3600 + 18446744073709551615.0 / 1024, 1e6);
    EXPECT_DOUBLE_EQ(download_deadline_seconds(1024, 1, 0), 2.0);  // a rate below 1 KiB/s counts as 1
}

TEST(RetryPolicy, TransientHttpStatuses) {
    for (long status : {500L, 502L, 503L, 504L, 408L, 429L}) EXPECT_TRUE(is_transient_http_status(status)) << status;
    for (long status : {400L, 401L, 403L, 404L, 410L, 416L}) EXPECT_FALSE(is_transient_http_status(status)) << status;
}

TEST(RetryPolicy, TransientCurlCodes) {
    for (int code : {curl::COULDNT_CONNECT, curl::PARTIAL_FILE, curl::OPERATION_TIMEDOUT, curl::RECV_ERROR,
                     curl::SEND_ERROR, curl::GOT_NOTHING}) {
        EXPECT_TRUE(is_transient_curl_code(code)) << code;
    }
    for (int code : {curl::PEER_FAILED_VERIFICATION, curl::SSL_CACERT_BADFILE, curl::URL_MALFORMAT,
                     curl::UNSUPPORTED_PROTOCOL, curl::WRITE_ERROR, curl::ABORTED_BY_CALLBACK}) {
        EXPECT_FALSE(is_transient_curl_code(code)) << code;
    }
}

TEST(UrlPolicy, ParsesSchemeAndHost) {
    const auto parts = parse_url("HTTPS://user:pw@Example.COM:8443/a/b?c#d");
    ASSERT_TRUE(parts.has_value());
    EXPECT_EQ(parts->scheme, "https");
    EXPECT_EQ(parts->host, "example.com");
    EXPECT_EQ(parse_url("http://[::1]:8080/x")->host, "::1");
    EXPECT_FALSE(parse_url("no-scheme/path").has_value());
    EXPECT_FALSE(parse_url("https:///path").has_value());
    EXPECT_FALSE(parse_url("http://[::1/x").has_value());
}

TEST(UrlPolicy, LoopbackHosts) {
    for (const char* host : {"127.0.0.1", "127.1.2.3", "localhost", "::1"}) EXPECT_TRUE(is_loopback_host(host)) << host;
    for (const char* host : {"127.0.0.1.example.com", "128.0.0.1", "10.0.0.1", "127.0.0.256", "localhost.evil", "127.0.0"}) {
        EXPECT_FALSE(is_loopback_host(host)) << host;
    }
}

TEST(UrlPolicy, HttpsAlwaysHttpOnlyOnLoopbackOrWhenAllowed) {
    EXPECT_EQ(url_refusal("https://github.com/o/r/releases/download/v1/x.whl", false), std::nullopt);
    EXPECT_EQ(url_refusal("http://127.0.0.1:8000/x.whl", false), std::nullopt);
    EXPECT_EQ(url_refusal("http://mirror.example/x.whl", true), std::nullopt);
    const auto refusal = url_refusal("http://mirror.example/x.whl", false);
    ASSERT_TRUE(refusal.has_value());
    EXPECT_NE(refusal->find("--allow-http"), std::string::npos);
    EXPECT_TRUE(url_refusal("file:///etc/passwd", true).has_value());
    EXPECT_TRUE(url_refusal("ftp://mirror.example/x.whl", true).has_value());
}

TEST(UrlPolicy, RedirectNeverStepsDownFromHttps) {
    EXPECT_EQ(redirect_refusal("https://github.com/x", "https://objects.githubusercontent.com/y", false), std::nullopt);
    EXPECT_TRUE(redirect_refusal("https://github.com/x", "http://objects.githubusercontent.com/y", true).has_value());
    EXPECT_TRUE(redirect_refusal("https://127.0.0.1/x", "http://127.0.0.1/y", true).has_value());
    EXPECT_EQ(redirect_refusal("http://127.0.0.1/x", "http://127.0.0.1:9/y", false), std::nullopt);
    EXPECT_TRUE(redirect_refusal("http://127.0.0.1/x", "http://mirror.example/y", false).has_value());
    EXPECT_TRUE(redirect_refusal("https://github.com/x", "file:///etc/passwd", true).has_value());
}

}  // namespace
}  // namespace culina::fetch
