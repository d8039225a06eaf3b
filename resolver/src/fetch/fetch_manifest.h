// The release manifest over the network, for an sdist that carries none (a development sdist):
// the same transport as wheels (CA bundle, proxies, stall timeout, retries, redirect policy), a
// size cap and the deadline that follows from it, and a private temporary file that nobody else
// can plant or read.
#pragma once

#include <string>

#include "fetch/fetch_wheel.h"
#include "manifest/manifest.h"

namespace culina::fetch {

// The body at `url`. Throws FetchError: configuration (URL refused), network, verification
// (larger than kManifestSizeLimit), local (no temporary folder).
std::string fetch_manifest_text(const std::string& url, const FetchOptions& options);

}  // namespace culina::fetch
