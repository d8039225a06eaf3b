// The helper's one error root and its one map of exit statuses (docs/ARCHITECTURE.md "Exit
// statuses"; the adapter's install_resolution.py reads the same numbers, checked by
// tests/resolve/test_settings_refused.py through `culina-resolver version --json`). Every error a
// command reports derives from Error, whose status is the process's exit status; what() is the
// message for people: the thing, the value and the fix.
#pragma once

#include <stdexcept>
#include <string>

namespace culina {

enum class ExitStatus : int {
    ok = 0,               // act on the decision (select, resolve), or the command did its job
    failed = 1,           // the command's work failed: a download that could not be verified, ...
    bad_input = 2,        // a command line, a file or a setting that cannot be used
    no_way_to_serve = 3,  // select/resolve: nothing can serve this host; the reason says what is missing
};

struct ExitStatusName {
    ExitStatus status;
    const char* name;  // as `version --json` lists it
};

inline constexpr ExitStatusName kExitStatusNames[] = {
    {ExitStatus::ok, "ok"},
    {ExitStatus::failed, "failed"},
    {ExitStatus::bad_input, "bad_input"},
    {ExitStatus::no_way_to_serve, "no_way_to_serve"},
};

inline int exit_code(ExitStatus status) { return static_cast<int>(status); }

struct Error : std::runtime_error {
    Error(ExitStatus status, const std::string& message) : std::runtime_error(message), status(status) {}
    ExitStatus status;
};

// A problem with the command line or a file it names; what() says which and how to fix it.
struct UsageError : Error {
    explicit UsageError(const std::string& message) : Error(ExitStatus::bad_input, message) {}
};

}  // namespace culina
