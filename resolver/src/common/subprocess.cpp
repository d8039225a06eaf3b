#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace culina {
namespace {

using Clock = std::chrono::steady_clock;

// Reads the child's pipe until it closes or the limit passes, then reaps the child.
ChildOutcome collect(pid_t pid, int read_fd, std::chrono::milliseconds limit) {
    ChildOutcome outcome;
    const Clock::time_point deadline = Clock::now() + limit;
    bool killed = false;
    char buffer[4096];
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) {
            kill(pid, SIGKILL);
            killed = true;
            break;
        }
        pollfd fd{read_fd, POLLIN, 0};
        const int ready = poll(&fd, 1, static_cast<int>(left.count()));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) continue;
        const ssize_t n = read(read_fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        outcome.output.append(buffer, static_cast<size_t>(n));
    }
    close(read_fd);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (killed) {
        outcome.status = ChildOutcome::Status::killed_at_limit;
    } else if (WIFEXITED(status)) {
        outcome.status = ChildOutcome::Status::exited;
        outcome.exit_code = WEXITSTATUS(status);
    } else {
        outcome.status = ChildOutcome::Status::crashed;
        outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
    return outcome;
}

void write_all(int fd, const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        done += static_cast<size_t>(n);
    }
}

}  // namespace

std::string ChildOutcome::describe() const {
    switch (status) {
        case Status::exited: return "exited with code " + std::to_string(exit_code);
        case Status::killed_at_limit: return "killed at the time limit";
        case Status::crashed: return "crashed with signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
        case Status::could_not_start: return "could not start: " + output;
    }
    return "unknown";
}

namespace {

// Forks; the child runs `in_child(write_fd)` and must not return. The parent collects what the
// child writes to the pipe until it exits or the limit passes.
ChildOutcome fork_and_collect(const std::function<void(int)>& in_child, std::chrono::milliseconds limit) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        return {ChildOutcome::Status::could_not_start, -1, 0, std::string("pipe: ") + std::strerror(errno)};
    }
    const pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return {ChildOutcome::Status::could_not_start, -1, 0, std::string("fork: ") + std::strerror(errno)};
    }
    if (pid == 0) {
        close(fds[0]);
        in_child(fds[1]);
        _exit(0);
    }
    close(fds[1]);
    return collect(pid, fds[0], limit);
}

}  // namespace

ChildOutcome run_in_child(const std::function<void(const ChildEmit&)>& body, std::chrono::milliseconds limit) {
    return fork_and_collect(
        [&body](int write_fd) { body([write_fd](const std::string& text) { write_all(write_fd, text); }); }, limit);
}

ChildOutcome run_command(const std::vector<std::string>& argv, std::chrono::milliseconds limit) {
    if (argv.empty()) return {ChildOutcome::Status::could_not_start, -1, 0, "empty command"};
    std::vector<char*> c_argv;
    for (const std::string& arg : argv) c_argv.push_back(const_cast<char*>(arg.c_str()));
    c_argv.push_back(nullptr);
    return fork_and_collect(
        [&c_argv](int write_fd) {
            dup2(write_fd, STDOUT_FILENO);
            dup2(write_fd, STDERR_FILENO);
            const int devnull = open("/dev/null", O_RDONLY);
            if (devnull >= 0) dup2(devnull, STDIN_FILENO);
            execvp(c_argv[0], c_argv.data());
            _exit(127);
        },
        limit);
}

}  // namespace culina
