#include "fetch/url_policy.h"

#include <algorithm>
#include <cctype>

#include "common/text.h"

namespace culina::fetch {
std::optional<UrlParts> parse_url(const std::string& url) {
    const size_t scheme_end = url.find("://");
    if (scheme_end == std::string::npos || scheme_end == 0) return std::nullopt;
    UrlParts parts;
    parts.scheme = lowercase(url.substr(0, scheme_end));
    const size_t authority_begin = scheme_end + 3;
    const size_t authority_end = url.find_first_of("/?#", authority_begin);
    std::string authority = url.substr(authority_begin, authority_end == std::string::npos
                                                            ? std::string::npos
                                                            : authority_end - authority_begin);
    if (const size_t at = authority.rfind('@'); at != std::string::npos) authority = authority.substr(at + 1);
    if (!authority.empty() && authority.front() == '[') {
        const size_t close = authority.find(']');
        if (close == std::string::npos) return std::nullopt;
        parts.host = authority.substr(1, close - 1);
    } else {
        parts.host = authority.substr(0, authority.find(':'));
    }
    if (parts.host.empty()) return std::nullopt;
    parts.host = lowercase(parts.host);
    return parts;
}

std::string redacted_url(const std::string& url) {
    const size_t scheme_end = url.find("://");
    if (scheme_end == std::string::npos) return printable(url);
    const size_t authority_begin = scheme_end + 3;
    const size_t path_begin = std::min(url.find_first_of("/?#", authority_begin), url.size());
    std::string authority = url.substr(authority_begin, path_begin - authority_begin);
    if (const size_t at = authority.rfind('@'); at != std::string::npos) authority = authority.substr(at + 1);
    const size_t path_end = std::min(url.find_first_of("?#", path_begin), url.size());
    return printable(url.substr(0, authority_begin) + authority + url.substr(path_begin, path_end - path_begin));
}

bool is_loopback_host(const std::string& host) {
    if (host == "localhost" || host == "::1") return true;
    // 127.0.0.0/8, written as a dotted quad.
    const std::vector<std::string> octets = split(host, '.');
    if (octets.size() != 4 || octets[0] != "127") return false;
    return std::all_of(octets.begin(), octets.end(), [](const std::string& octet) {
        const std::optional<int> value = parse_small_uint(octet);
        return value.has_value() && *value <= 255 && octet.size() <= 3;
    });
}

std::optional<std::string> url_refusal(const std::string& url, bool allow_http) {
    const std::optional<UrlParts> parts = parse_url(url);
    if (!parts) {
        return "'" + redacted_url(url) +
               "' is not an absolute URL (expected https://host/path, or a local folder: /path or file:///path)";
    }
    if (parts->scheme == "https") return std::nullopt;
    if (parts->scheme == "http") {
        if (allow_http || is_loopback_host(parts->host)) return std::nullopt;
        return "refusing plain http for '" + redacted_url(url) +
               "': use an https URL, or pass --allow-http when the manifest (with its hashes) came embedded "
               "in the sdist";
    }
    return "refusing '" + redacted_url(url) + "': only https (and http on loopback or with --allow-http) is supported";
}

std::optional<std::string> redirect_refusal(const std::string& from, const std::string& to, bool allow_http) {
    const std::optional<UrlParts> source = parse_url(from);
    const std::optional<UrlParts> target = parse_url(to);
    if (source && target && source->scheme == "https" && target->scheme == "http") {
        return "refusing the redirect from '" + redacted_url(from) + "' to plain http '" + redacted_url(to) +
               "': a download that starts on https stays on https; fix the mirror's redirect or use a "
               "base URL that serves https throughout";
    }
    if (const auto refusal = url_refusal(to, allow_http)) return "redirect from '" + redacted_url(from) + "' not followed: " + *refusal;
    return std::nullopt;
}

}  // namespace culina::fetch
