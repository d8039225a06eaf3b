// An environment for settings tests: exactly the variables given, nothing from the process.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "common/setting_names.h"

namespace culina::test_support {

inline EnvLookup env_of(std::map<std::string, std::string> values) {
    return [values](const std::string& name) -> std::optional<std::string> {
        const auto found = values.find(name);
        if (found == values.end()) return std::nullopt;
        return found->second;
    };
}

}  // namespace culina::test_support
