// An asset from a local release folder (a mirror an administrator filled): copied into the part
// file while it is hashed, exactly as a download would be, so the same checks follow. The folder
// is opened read-only and never written to.
#pragma once

#include <cstdint>
#include <string>

#include "fetch/http_download.h"

namespace culina::fetch {

// Throws FetchError: unavailable (no such file in the folder), verification (not a regular file,
// or its size is not `expected_size`), local (cannot read it or write the part file).
// `names`: the settings a message may name (RELEASE_URL).
DownloadResult copy_local_asset(const std::string& source, const std::string& part_path, std::uint64_t expected_size,
                                const SettingNames& names);

}  // namespace culina::fetch
