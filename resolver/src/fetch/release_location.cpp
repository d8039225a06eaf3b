#include "fetch/release_location.h"

#include "common/text.h"
#include "fetch/fetch_error.h"
#include "fetch/url_policy.h"

namespace culina::fetch {
namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string percent_decoded(const std::string& text) {
    std::string decoded;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 && hex_value(text[i + 2]) >= 0) {
            decoded.push_back(static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2])));
            i += 2;
        } else {
            decoded.push_back(text[i]);
        }
    }
    return decoded;
}

}  // namespace

std::string asset_url(const std::string& base, const std::string& file) {
    const bool is_url = base.find("://") != std::string::npos;
    const std::size_t suffix_at = is_url ? std::min(base.find_first_of("?#"), base.size()) : base.size();
    std::string path = base.substr(0, suffix_at);
    while (!path.empty() && path.back() == '/') path.pop_back();
    std::string suffix = base.substr(suffix_at);
    if (const std::size_t fragment = suffix.find('#'); fragment != std::string::npos) suffix.resize(fragment);
    return path + "/" + file + suffix;
}

std::optional<std::string> local_asset_path(const std::string& location) {
    if (starts_with(location, "/")) return location;
    if (lowercase(location.substr(0, 7)) != "file://") return std::nullopt;
    const std::string rest = location.substr(7);
    const std::size_t path_at = rest.find('/');
    const std::string host = rest.substr(0, path_at);
    if (path_at == std::string::npos || (!host.empty() && lowercase(host) != "localhost")) {
        throw configuration_error("'" + redacted_url(location) +
                                  "' is not a local folder: a file:// URL names a path on this machine, like "
                                  "file:///srv/wheels");
    }
    return percent_decoded(rest.substr(path_at, rest.find_first_of("?#", path_at) - path_at));
}

bool is_release_location(const std::string& base) {
    const std::string scheme = lowercase(base.substr(0, 8));
    if (starts_with(scheme, "http://") || starts_with(scheme, "https://")) return base.size() > scheme.find("//") + 2;
    try {
        return local_asset_path(base).has_value();
    } catch (const FetchError&) {
        return false;
    }
}

}  // namespace culina::fetch
