#include "fetch/http_download.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <thread>

#include "fetch/curl_library.h"
#include "fetch/fetch_error.h"
#include "fetch/retry_policy.h"
#include "common/sha256.h"
#include "common/text.h"
#include "fetch/url_policy.h"
#include "fetch/wheel_cache.h"

namespace culina::fetch {
namespace {

constexpr int kMaxRedirects = 10;
// An error or redirect body is read this far and no further: the transfer is cut there, so an
// endless body costs nothing but this.
constexpr std::size_t kErrorBodyLimit = 2048;
// Below this rate, averaged over the TIMEOUT setting's seconds, an attempt counts as stalled: a server
// that trickles a byte a second is treated like one that sends nothing.
constexpr curl::OffT kMinimumBytesPerSecond = 1024;

using Clock = std::chrono::steady_clock;

// When the whole download began and how long it may take (download_deadline_seconds).
struct Deadline {
    Clock::time_point start;
    double seconds;

    double elapsed() const { return std::chrono::duration<double>(Clock::now() - start).count(); }
    double left() const { return seconds - elapsed(); }
};

// The part file and the digest of exactly the bytes it holds.
class PartFile {
public:
    explicit PartFile(const std::string& path) : path_(path) {
        fd_ = open_own_file(path, O_RDWR, true);
        struct stat info {};
        if (::fstat(fd_, &info) != 0) fail("stat");
        size_ = static_cast<std::uint64_t>(info.st_size);
        rehash();
    }
    ~PartFile() { ::close(fd_); }
    PartFile(const PartFile&) = delete;
    PartFile& operator=(const PartFile&) = delete;

    std::uint64_t size() const { return size_; }

    void truncate() {
        if (::ftruncate(fd_, 0) != 0) fail("truncate");
        if (::lseek(fd_, 0, SEEK_SET) != 0) fail("seek in");
        size_ = 0;
        hasher_.reset();
    }

    // False (with errno) when the disk refuses the bytes.
    bool append(const char* data, std::size_t count) {
        hasher_.update(data, count);
        size_ += count;
        while (count > 0) {
            const ssize_t written = ::write(fd_, data, count);
            if (written < 0) {
                if (errno == EINTR) continue;
                return false;
            }
            data += written;
            count -= static_cast<std::size_t>(written);
        }
        return true;
    }

    std::string finish_hex() { return hasher_.finish_hex(); }

private:
    // A prefix left by an interrupted run is hashed once, so that resuming continues the digest.
    void rehash() {
        std::string chunk(1 << 20, '\0');
        std::uint64_t left = size_;
        while (left > 0) {
            const ssize_t got = ::read(fd_, chunk.data(), std::min<std::uint64_t>(chunk.size(), left));
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) fail("read");
            hasher_.update(chunk.data(), static_cast<std::size_t>(got));
            left -= static_cast<std::uint64_t>(got);
        }
    }

    [[noreturn]] void fail(const char* what) const {
        throw FetchError(FetchError::Kind::local, std::string("cannot ") + what + " the partial download " + path_ +
                                                      ": " + std::strerror(errno) +
                                                      "; check the cache folder is writable");
    }

    std::string path_;
    int fd_ = -1;
    std::uint64_t size_ = 0;
    Sha256 hasher_;
};

// State shared with libcurl's callbacks during one request.
struct Transfer {
    Transfer(PartFile& part, std::uint64_t expected_size, Progress& progress, std::uint64_t& session_received,
             int timeout_seconds, const Deadline& deadline)
        : part(part),
          expected_size(expected_size),
          progress(progress),
          session_received(session_received),
          timeout_seconds(timeout_seconds),
          deadline(deadline) {}

    PartFile& part;
    const std::uint64_t expected_size;
    Progress& progress;
    std::uint64_t& session_received;
    const int timeout_seconds;
    const Deadline& deadline;

    long status = 0;
    bool body_to_file = false;
    bool restarted = false;  // the server ignored Range and sent the whole asset
    std::optional<std::uint64_t> content_range_start;
    std::string location;  // the Location header, for a redirect whose body was cut (libcurl then reports none)
    std::string error_body;
    bool error_body_cut = false;  // the body passed kErrorBodyLimit and the transfer was stopped
    bool oversize = false;
    bool range_mismatch = false;
    int write_errno = 0;
    bool stalled = false;
    bool past_deadline = false;
    // The current measuring window for the minimum rate: when it began and the bytes seen then.
    Clock::time_point window_start = Clock::now();
    curl::OffT window_start_bytes = 0;
};

bool header_is(const std::string& line, const char* name) {
    const std::size_t length = std::strlen(name);
    return line.size() > length && strncasecmp(line.c_str(), name, length) == 0;
}

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
    auto& transfer = *static_cast<Transfer*>(user);
    const std::size_t bytes = size * count;
    const std::string line(data, bytes);
    if (line.rfind("HTTP/", 0) == 0) {
        const std::size_t space = line.find(' ');
        transfer.status = space == std::string::npos ? 0 : std::strtol(line.c_str() + space + 1, nullptr, 10);
        transfer.content_range_start.reset();
    } else if (header_is(line, "location:")) {
        transfer.location = trim(line.substr(std::strlen("location:")));
    } else if (header_is(line, "content-range:")) {
        const std::size_t digits = line.find_first_of("0123456789");
        if (digits != std::string::npos) transfer.content_range_start = std::strtoull(line.c_str() + digits, nullptr, 10);
    } else if (line == "\r\n" || line == "\n") {
        const bool body_is_asset = transfer.status == 200 || transfer.status == 206;
        transfer.body_to_file = body_is_asset;
        if (transfer.status == 200 && transfer.part.size() > 0) {
            transfer.part.truncate();
            transfer.restarted = true;
        }
        if (transfer.status == 206 && transfer.content_range_start != transfer.part.size()) {
            transfer.range_mismatch = true;
            return 0;
        }
    }
    return bytes;
}

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
    auto& transfer = *static_cast<Transfer*>(user);
    const std::size_t bytes = size * count;
    if (!transfer.body_to_file) {
        if (transfer.error_body.size() + bytes > kErrorBodyLimit) {
            transfer.error_body.append(data, kErrorBodyLimit - transfer.error_body.size());
            transfer.error_body_cut = true;
            return 0;
        }
        transfer.error_body.append(data, bytes);
        return bytes;
    }
    if (transfer.part.size() + bytes > transfer.expected_size) {
        transfer.oversize = true;
        return 0;
    }
    if (!transfer.part.append(data, bytes)) {
        transfer.write_errno = errno;
        return 0;
    }
    transfer.session_received += bytes;
    return bytes;
}

int on_progress(void* user, curl::OffT, curl::OffT now, curl::OffT, curl::OffT) {
    auto& transfer = *static_cast<Transfer*>(user);
    if (transfer.deadline.left() <= 0) {
        transfer.past_deadline = true;
        return 1;
    }
    const Clock::time_point time = Clock::now();
    if (time - transfer.window_start >= std::chrono::seconds(transfer.timeout_seconds)) {
        if (now - transfer.window_start_bytes < kMinimumBytesPerSecond * transfer.timeout_seconds) {
            transfer.stalled = true;
            return 1;
        }
        transfer.window_start = time;
        transfer.window_start_bytes = now;
    }
    if (transfer.body_to_file) transfer.progress.update(transfer.part.size(), transfer.session_received);
    return 0;
}

struct AttemptFailure {
    bool transient;
    FetchError::Kind kind;
    std::string reason;
};

std::string status_hint(long status, const SettingNames& names) {
    if (status == 404) {
        return ": the server has no such asset; check the base URL (--base-url or " + names.of("RELEASE_URL") + ") and that "
               "the release holds this file";
    }
    if (status == 401 || status == 403) {
        return ": access denied; check the base URL, and the proxy settings (https_proxy, no_proxy)";
    }
    return "";
}

// A Location made absolute against the URL that sent it: already absolute, or a path on its host.
// Empty for other relative forms, which are then reported as a redirect without a usable target.
std::string absolute_location(const std::string& from, const std::string& location) {
    if (location.find("://") != std::string::npos) return location;
    if (!starts_with(location, "/") || starts_with(location, "//")) return "";
    const std::size_t authority_end = from.find_first_of("/?#", from.find("://") + 3);
    return from.substr(0, authority_end) + location;
}

// The asset's name for messages: the last segment of the (shown) URL's path.
std::string asset_name(const std::string& shown_url) {
    const std::size_t slash = shown_url.rfind('/');
    return slash == std::string::npos || slash + 1 == shown_url.size() ? shown_url : shown_url.substr(slash + 1);
}

std::string body_excerpt(const std::string& body) {
    std::string excerpt;
    for (char c : body.substr(0, 200)) excerpt.push_back(c == '\n' || c == '\r' ? ' ' : c);
    return excerpt.empty() ? "" : " (server said: " + printable(excerpt) + ")";
}

class Downloader {
public:
    Downloader(const DownloadRequest& request, Progress& progress, const Log& log)
        : request_(request),
          progress_(progress),
          log_(log),
          part_(request.part_path),
          deadline_{Clock::now(), download_deadline_seconds(request.expected_size, request.timeout_seconds,
                                                            request.min_rate_kib)} {}

    DownloadResult run() {
        say("allowing " + format_duration(deadline_.seconds) + " for the whole download (" + deadline_basis() + ")");
        DownloadResult result;
        const int attempts = request_.retries + 1;
        std::mt19937 random(std::random_device{}());
        for (int attempt = 1;; ++attempt) {
            result.attempts = attempt;
            if (request_.size_is_limit) {
                part_.truncate();
            } else if (part_.size() > request_.expected_size) {
                say("the partial download holds more bytes than the asset's size: starting over");
                part_.truncate();
            }
            if (!request_.size_is_limit && part_.size() == request_.expected_size) break;
            if (part_.size() > 0) {
                say("resuming at byte " + std::to_string(part_.size()) + " of " +
                    std::to_string(request_.expected_size) + " with a Range request");
            }
            const std::optional<AttemptFailure> failure = attempt_once();
            if (!failure) break;
            if (!failure->transient) throw FetchError(failure->kind, failure->reason);
            if (attempt == attempts) {
                throw FetchError(failure->kind,
                                 "gave up after " + std::to_string(attempts) + " attempt" + (attempts > 1 ? "s" : "") +
                                     "; the last one failed: " + failure->reason +
                                     ". Check the network and proxy (https_proxy, no_proxy), or raise " + request_.names.of("RETRIES") + " "
                                     "(now " + std::to_string(request_.retries) + ") or " + request_.names.of("TIMEOUT") + " (now " +
                                     std::to_string(request_.timeout_seconds) + " s)");
            }
            const double delay = backoff_seconds(attempt, std::uniform_real_distribution<double>(0.0, 1.0)(random));
            if (delay >= deadline_.left()) {
                const std::string last = "; attempt " + std::to_string(attempt) + " of " + std::to_string(attempts) +
                                         " failed: " + failure->reason;
                throw FetchError(FetchError::Kind::network, deadline_message("a retry would begin past", last));
            }
            char seconds[16];
            std::snprintf(seconds, sizeof seconds, "%.1f", delay);
            say("attempt " + std::to_string(attempt) + " of " + std::to_string(attempts) + " failed: " +
                failure->reason + "; transient, retrying in " + seconds + " s");
            std::this_thread::sleep_for(std::chrono::duration<double>(delay));
        }
        result.sha256 = part_.finish_hex();
        result.received = session_received_;
        return result;
    }

private:
    void say(const std::string& message) {
        progress_.interrupt();
        log_(message);
    }

    // How the deadline was made, for the log and the error.
    std::string deadline_basis() const {
        return request_.names.of("TIMEOUT") + "=" + std::to_string(request_.timeout_seconds) + " s plus " +
               (request_.size_is_limit ? "up to " : "") + format_bytes(request_.expected_size) + " at " +
               request_.names.of("MIN_RATE") + "=" + std::to_string(request_.min_rate_kib) + " KiB/s";
    }

    // `when`: how the deadline stopped it; `detail` follows the rate reached.
    std::string deadline_message(const std::string& when, const std::string& detail) const {
        const std::string url = redacted_url(request_.url);
        const double elapsed = deadline_.elapsed();
        const double rate = elapsed > 0 ? static_cast<double>(session_received_) / elapsed : 0;
        return asset_name(url) + ": stopped the download from " + url + ": " + when + " its deadline of " +
               format_duration(deadline_.seconds) + " (" + deadline_basis() + "): " + format_bytes(session_received_) +
               " arrived in " + format_duration(elapsed) + ", " + format_bytes(static_cast<std::uint64_t>(rate)) +
               "/s on average" + detail + ". On a slow but working link lower " + request_.names.of("MIN_RATE") +
               " (1 is the least) or raise " + request_.names.of("TIMEOUT") +
               "; otherwise check the network and the proxy (https_proxy, no_proxy)";
    }

    // One attempt: the request and the redirects it leads to.
    std::optional<AttemptFailure> attempt_once() {
        std::string url = request_.url;
        for (int hop = 0;; ++hop) {
            Transfer transfer(part_, request_.expected_size, progress_, session_received_, request_.timeout_seconds,
                              deadline_);
            curl::Easy easy;
            char error_buffer[curl::ERROR_SIZE] = "";
            const std::string range = std::to_string(part_.size()) + "-";
            configure(easy, url, transfer, error_buffer, part_.size() > 0 ? range.c_str() : nullptr);
            int code = curl::library().easy_perform(easy.get());
            // Stopping an error or redirect body at its cap is not a transfer failure.
            if (transfer.error_body_cut && code == curl::WRITE_ERROR) code = curl::OK;
            if (transfer.restarted) say("the server ignored the Range request and sent the whole asset: starting over");
            const long status = easy.response_code();
            if (code == curl::OK && status >= 300 && status < 400) {
                const std::string next = transfer.error_body_cut ? absolute_location(url, transfer.location)
                                                                 : easy.redirect_url();
                if (next.empty()) {
                    return permanent(FetchError::Kind::network,
                                     "HTTP " + std::to_string(status) + " without a Location from " + redacted_url(url));
                }
                if (hop == kMaxRedirects) {
                    return permanent(FetchError::Kind::network, "more than " + std::to_string(kMaxRedirects) +
                                                                    " redirects starting at " + redacted_url(request_.url));
                }
                if (const auto refusal = redirect_refusal(url, next, request_.allow_http)) {
                    return permanent(FetchError::Kind::network, *refusal);
                }
                url = next;
                continue;
            }
            return judge(code, status, url, transfer, error_buffer);
        }
    }

    void configure(curl::Easy& easy, const std::string& url, Transfer& transfer, char* error_buffer, const char* range) {
        easy.set(curl::OPT_URL, url.c_str());
        easy.set(curl::OPT_USERAGENT, "culina-resolver");
        easy.set(curl::OPT_NOSIGNAL, 1L);
        // No connect may outlast the deadline (whole seconds, at least one: 0 would mean none).
        const double connect_seconds = std::min<double>(request_.timeout_seconds, std::ceil(deadline_.left()));
        easy.set(curl::OPT_CONNECTTIMEOUT, static_cast<long>(std::max(1.0, connect_seconds)));
        // Large reads: fewer callbacks per byte on fast links.
        easy.set(curl::OPT_BUFFERSIZE, 512L * 1024);
        easy.set(curl::OPT_ERRORBUFFER, static_cast<void*>(error_buffer));
        easy.set(curl::OPT_HEADERFUNCTION, &on_header);
        easy.set(curl::OPT_HEADERDATA, static_cast<void*>(&transfer));
        easy.set(curl::OPT_WRITEFUNCTION, &on_body);
        easy.set(curl::OPT_WRITEDATA, static_cast<void*>(&transfer));
        easy.set(curl::OPT_NOPROGRESS, 0L);
        easy.set(curl::OPT_XFERINFOFUNCTION, &on_progress);
        easy.set(curl::OPT_XFERINFODATA, static_cast<void*>(&transfer));
        if (!request_.ca_bundle.empty()) easy.set(curl::OPT_CAINFO, request_.ca_bundle.c_str());
        if (range != nullptr) easy.set(curl::OPT_RANGE, range);
    }

    static AttemptFailure permanent(FetchError::Kind kind, const std::string& reason) { return {false, kind, reason}; }
    static AttemptFailure transient(const std::string& reason) { return {true, FetchError::Kind::network, reason}; }

    std::optional<AttemptFailure> judge(int code, long status, const std::string& requested_url, Transfer& transfer,
                                        const char* error_buffer) {
        const std::string url = redacted_url(requested_url);
        const std::string size = std::to_string(request_.expected_size);
        if (transfer.oversize && request_.size_is_limit) {
            return permanent(FetchError::Kind::verification,
                             "the server sent more than " + size + " bytes for " + url +
                                 ", more than such a file may be: check that the URL names the right file");
        }
        if (transfer.oversize) {
            return permanent(FetchError::Kind::verification,
                             "the server sent more than the manifest's size of " + size + " bytes for " + url +
                                 ": the release asset does not match the manifest");
        }
        if (transfer.range_mismatch) {
            const std::string asked = std::to_string(part_.size());
            part_.truncate();
            return transient("asked " + url + " for the bytes from " + asked +
                             " on and it answered with another range; starting over");
        }
        if (transfer.write_errno != 0) {
            return permanent(FetchError::Kind::local, "cannot write " + request_.part_path + ": " +
                                                          std::strerror(transfer.write_errno) +
                                                          "; free disk space or set " + request_.names.of("CACHE_DIR") + " elsewhere");
        }
        if (transfer.past_deadline) return permanent(FetchError::Kind::network, deadline_message("it passed", ""));
        if (transfer.stalled) {
            return transient("no progress for " + std::to_string(request_.timeout_seconds) +
                             " s (" + request_.names.of("TIMEOUT") + "; under " + format_bytes(kMinimumBytesPerSecond) +
                             "/s counts as none) from " + url);
        }
        if (code != curl::OK) return curl_failure(code, url, error_buffer);
        if (status == 200 || status == 206) {
            if (request_.size_is_limit || part_.size() == request_.expected_size) return std::nullopt;
            return permanent(FetchError::Kind::verification,
                             "the response from " + url + " ended after " + std::to_string(part_.size()) +
                                 " bytes but the manifest's size is " + size +
                                 ": the release asset does not match the manifest");
        }
        if (status == 416) {
            return permanent(FetchError::Kind::verification,
                             url + " cannot serve bytes from " + std::to_string(part_.size()) +
                                 " (HTTP 416): the release asset is shorter than the manifest's size of " + size);
        }
        const std::string reason = "HTTP " + std::to_string(status) + " from " + url;
        if (is_transient_http_status(status)) return transient(reason + body_excerpt(transfer.error_body));
        return permanent(FetchError::Kind::network, reason + status_hint(status, request_.names) + body_excerpt(transfer.error_body));
    }

    std::optional<AttemptFailure> curl_failure(int code, const std::string& url, const char* error_buffer) {
        const std::string detail = printable(*error_buffer ? error_buffer : curl::library().easy_strerror(code));
        if (code == curl::PEER_FAILED_VERIFICATION) {
            return permanent(FetchError::Kind::network,
                             "the TLS certificate of " + url + " is not trusted (" + detail +
                                 "); behind a TLS-inspecting proxy or with a private mirror, point " + request_.names.of("CA_BUNDLE") +
                                 " to its CA certificate (PEM)" +
                                 (request_.ca_bundle.empty() ? std::string()
                                                             : "; now trusting " + request_.ca_bundle + " from " +
                                                                   request_.ca_bundle_source));
        }
        if (code == curl::SSL_CACERT_BADFILE) {
            return permanent(FetchError::Kind::configuration,
                             "cannot use the CA bundle " + request_.ca_bundle + " from " + request_.ca_bundle_source +
                                 " (" + detail + "): point it to a PEM file of CA certificates");
        }
        const std::string reason = detail + " (libcurl error " + std::to_string(code) + ") for " + url;
        if (is_transient_curl_code(code)) return transient(reason);
        return permanent(FetchError::Kind::network, reason);
    }

    const DownloadRequest& request_;
    Progress& progress_;
    const Log& log_;
    PartFile part_;
    const Deadline deadline_;
    std::uint64_t session_received_ = 0;
};

}  // namespace

DownloadResult download(const DownloadRequest& request, Progress& progress, const Log& log) {
    if (const auto refusal = url_refusal(request.url, request.allow_http)) {
        throw FetchError(FetchError::Kind::configuration, *refusal);
    }
    const std::string curl_version = curl::library().version();
    log("using " + curl_version.substr(0, curl_version.find(' ', curl_version.find(' ') + 1)));
    Downloader downloader(request, progress, log);
    DownloadResult result = downloader.run();
    progress.finish(result.received);
    return result;
}

}  // namespace culina::fetch
