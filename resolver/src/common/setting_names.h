// The helper's settings are environment variables named PREFIX + suffix. The prefix belongs to
// the caller (`culina-resolver --env-prefix PREFIX`; CULINA_ when none is given, for direct use and
// the tests: the adapter always passes its own), so every message names the
// variable the user actually sets.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace culina {

inline constexpr const char* kDefaultEnvPrefix = "CULINA_";

struct SettingNames {
    std::string prefix = kDefaultEnvPrefix;

    // "TIMEOUT" -> "CULINA_TIMEOUT"
    std::string of(const std::string& suffix) const { return prefix + suffix; }

    // The caller's short name, made of its prefix ("MY_PKG_" -> "my-pkg"): the default cache
    // folder and the temporary folders are named with it, so nothing names another project.
    std::string caller() const;
};

// One environment variable, or nullopt when unset (an empty value is returned as "").
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment.
EnvLookup process_environment();

// [A-Z][A-Z0-9_]*_ : an upper-case name ending in '_', such as CULINA_ or MYPROJ_.
bool is_valid_env_prefix(const std::string& prefix);

}  // namespace culina
