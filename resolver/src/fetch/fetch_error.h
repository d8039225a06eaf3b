// Why a fetch stopped. `kind` lets the CLI pick its exit code; what() is the message for people:
// it names the thing, the value and what to do about it.
#pragma once

#include <stdexcept>
#include <string>

namespace culina::fetch {

struct FetchError : std::runtime_error {
    enum class Kind {
        configuration,  // a setting or argument that cannot be used (exit 2)
        network,        // the asset could not be transferred
        unavailable,    // offline (CULINA_OFFLINE=1) and not in the cache
        verification,   // the bytes arrived but are not the wheel the manifest describes
        local,          // the cache or the machine (disk, permissions, missing library)
    };

    FetchError(Kind kind, const std::string& message) : std::runtime_error(message), kind(kind) {}

    Kind kind;
};

inline FetchError configuration_error(const std::string& message) {
    return FetchError(FetchError::Kind::configuration, message);
}

}  // namespace culina::fetch
