// Where release assets live: an http(s) base URL, or a local folder (an absolute path or a
// file:// URL) that an administrator filled with `culina-resolver mirror`. A folder is only read.
#pragma once

#include <optional>
#include <string>

namespace culina::fetch {

// The manifest's name among a release's assets (the release scripts upload it beside the wheels).
inline constexpr const char* kManifestAssetName = "release-manifest.json";

// The asset `file` under `base`: "<base path>/<file>" with the base's ?query (a token) kept after
// the file name, so that "https://host/rel?sig=x" gives "https://host/rel/<file>?sig=x".
std::string asset_url(const std::string& base, const std::string& file);

// The local file an asset location names: "/srv/culina/x.whl" or "file:///srv/culina/x.whl"
// (percent escapes decoded); nullopt for a network URL. Throws FetchError(configuration) for a
// file:// URL naming another host or a relative path.
std::optional<std::string> local_asset_path(const std::string& location);

// Whether `base` can be a release location: an http(s) URL, an absolute path, or a file:// URL
// of this machine.
bool is_release_location(const std::string& base);

}  // namespace culina::fetch
