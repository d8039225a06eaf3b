#include "fetch/fetch_manifest.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "common/text.h"
#include "fetch/fetch_error.h"
#include "fetch/http_download.h"
#include "fetch/wheel_cache.h"

namespace culina::fetch {
namespace {

// mkdtemp's folder is 0700 and new, so the part file inside it cannot be a planted link.
class PrivateFolder {
public:
    explicit PrivateFolder(const SettingNames& names) : path_(make_private_folder(names.caller() + "-manifest")) {}
    ~PrivateFolder() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    PrivateFolder(const PrivateFolder&) = delete;
    PrivateFolder& operator=(const PrivateFolder&) = delete;

    const std::string& path() const { return path_; }

private:
    std::string path_;
};

}  // namespace

std::string fetch_manifest_text(const std::string& url, const FetchOptions& options) {
    const PrivateFolder folder(options.settings.names);
    DownloadRequest request;
    request.url = url;
    request.part_path = folder.path() + "/release-manifest.json";
    request.expected_size = kManifestSizeLimit;
    request.size_is_limit = true;
    request.allow_http = options.allow_http;
    request.timeout_seconds = options.settings.timeout_seconds;
    request.retries = options.settings.retries;
    // Its deadline comes from the cap: TIMEOUT plus kManifestSizeLimit at MIN_RATE.
    request.min_rate_kib = options.settings.min_rate_kib;
    request.ca_bundle = options.settings.ca_bundle;
    request.ca_bundle_source = options.settings.ca_bundle_source;
    request.names = options.settings.names;
    // A few KiB: no progress line is worth printing.
    std::ostringstream quiet;
    Progress progress(quiet, false, 1e9, "", kManifestSizeLimit);
    const auto log = [&](const std::string& message) {
        if (options.log) options.log(message);
    };
    download(request, progress, log);
    const std::optional<std::string> text = read_text_file(request.part_path);
    if (!text) {
        throw FetchError(FetchError::Kind::local, "cannot read back the downloaded " + request.part_path);
    }
    return *text;
}

}  // namespace culina::fetch
