// A user setting (an environment variable) whose value cannot be understood.
// The message names the variable, the value and what is accepted.
#pragma once

#include <string>

#include "common/error.h"
#include "common/text.h"

namespace culina {

struct SettingError : Error {
    SettingError(const std::string& variable, const std::string& value, const std::string& accepted)
        : Error(ExitStatus::bad_input, variable + "='" + printable(value) + "' is not understood; accepted: " + accepted) {}
};

}  // namespace culina
