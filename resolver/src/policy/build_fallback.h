// When the policy may build locally instead of installing a prebuilt wheel (ONLY_BINARY,
// BUILD_ON_MISMATCH). A wheel that was asked for by name, or that arrived but failed its
// checksum, is never silently replaced by a build: the user must notice a tampered mirror.
#pragma once

namespace culina {

struct BuildFallback {
    bool never = false;           // ONLY_BINARY=1: a prebuilt wheel or an error, never a local build
    bool after_mismatch = false;  // BUILD_ON_MISMATCH=1: a wheel that fails verification falls back to a build
};

// Why the chosen wheel could not be used, as far as the policy cares.
enum class FetchFailure {
    unavailable,   // network, offline, the cache or the disk: the bytes never arrived
    verification,  // the bytes arrived but are not the wheel the manifest describes
};

}  // namespace culina
