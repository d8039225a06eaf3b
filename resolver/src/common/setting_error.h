// A user setting (an environment variable) whose value cannot be understood.
// The message names the variable, the value and what is accepted.
#pragma once

#include <stdexcept>
#include <string>

#include "common/text.h"

namespace culina {

struct SettingError : std::runtime_error {
    SettingError(const std::string& variable, const std::string& value, const std::string& accepted)
        : std::runtime_error(variable + "='" + printable(value) + "' is not understood; accepted: " + accepted) {}
};

}  // namespace culina
