// A value given to the policy from outside (environment, tags file, configured arch list) that
// cannot be understood. what() names the variable or file, the value, and what is accepted.
#pragma once

#include <string>

#include "common/error.h"

namespace culina {

struct PolicyInputError : Error {
    explicit PolicyInputError(const std::string& message) : Error(ExitStatus::bad_input, message) {}
};

}  // namespace culina
