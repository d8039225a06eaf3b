// Why a fetch stopped. `kind` decides the exit status (a configuration problem is bad input,
// anything else a failed fetch); what() is the message for people: it names the thing, the value
// and what to do about it.
#pragma once

#include "common/error.h"
#include <string>

namespace culina::fetch {

struct FetchError : Error {
    enum class Kind {
        configuration,  // a setting or argument that cannot be used (ExitStatus::bad_input)
        network,        // the asset could not be transferred
        unavailable,    // offline (<PREFIX>OFFLINE=1) and not in the cache
        verification,   // the bytes arrived but are not the wheel the manifest describes
        local,          // the cache or the machine (disk, permissions, missing library)
    };

    FetchError(Kind kind, const std::string& message)
        : Error(kind == Kind::configuration ? ExitStatus::bad_input : ExitStatus::failed, message), kind(kind) {}

    Kind kind;
};

inline FetchError configuration_error(const std::string& message) {
    return FetchError(FetchError::Kind::configuration, message);
}

}  // namespace culina::fetch
