// Which URLs the fetch may request. HTTPS always; plain http only on loopback or when the caller
// says the expected hashes came from a trusted place (--allow-http: the manifest embedded in the
// sdist). A redirect may never go from https down to http.
#pragma once

#include <optional>
#include <string>

namespace culina::fetch {

struct UrlParts {
    std::string scheme;  // lowercase
    std::string host;    // without brackets, port or user info; lowercase
};

std::optional<UrlParts> parse_url(const std::string& url);

// The URL as it may be shown: user, password, query and fragment removed (tokens live there,
// presigned redirect targets included). Text that is no URL is returned with control characters
// escaped.
std::string redacted_url(const std::string& url);
bool is_loopback_host(const std::string& host);

// nullopt when the URL may be requested; otherwise why not and what to do instead.
std::optional<std::string> url_refusal(const std::string& url, bool allow_http);
std::optional<std::string> redirect_refusal(const std::string& from, const std::string& to, bool allow_http);

}  // namespace culina::fetch
