// A value given to the policy from outside (environment, tags file, configured arch list) that
// cannot be understood. what() names the variable or file, the value, and what is accepted.
#pragma once

#include <stdexcept>

namespace culina {

struct PolicyInputError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

}  // namespace culina
