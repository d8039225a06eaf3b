// Child processes with a time limit: the probe must never hang on a stuck driver or tool.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace culina {

struct ChildOutcome {
    enum class Status { exited, killed_at_limit, output_too_long, crashed, could_not_start };
    Status status = Status::could_not_start;
    int exit_code = -1;  // when exited
    int signal = 0;      // when crashed
    std::string output;  // what the child wrote to its stdout (stderr too, for commands), at most kChildOutputLimit
    bool output_capped = false;
    std::string describe() const;
};

// A probe answer is a few KiB; a child writing more is killed rather than read into memory.
inline constexpr std::size_t kChildOutputLimit = 1 << 20;

// What a child body calls to hand text back; text sent before a hang or crash is kept.
using ChildEmit = std::function<void(const std::string&)>;

// Runs body(emit) in a forked child in a process group of its own, with stdio on /dev/null;
// everything emitted is handed back as output. At the limit, at the output cap or when the
// child exits, the whole group is killed, and so is every other descendant (one that moved to a
// group or session of its own too): nothing it started outlives the call. The call returns when
// the child has exited, not when every holder of the output pipe has closed it.
ChildOutcome run_in_child(const std::function<void(const ChildEmit&)>& body, std::chrono::milliseconds limit);

// Runs argv[0] (found on PATH when it has no slash) and captures stdout and stderr.
ChildOutcome run_command(const std::vector<std::string>& argv, std::chrono::milliseconds limit);

}  // namespace culina
