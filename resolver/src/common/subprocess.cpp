#include "common/subprocess.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "common/text.h"

namespace culina {
namespace {

using Clock = std::chrono::steady_clock;

// Appends a read to the output; false once the output passed kChildOutputLimit (then cut there).
bool keep_output(ChildOutcome& outcome, const char* data, ssize_t count) {
    outcome.output.append(data, static_cast<size_t>(count));
    if (outcome.output.size() <= kChildOutputLimit) return true;
    outcome.output.resize(kChildOutputLimit);
    outcome.output_capped = true;
    return false;
}

// What the child wrote before it exited and is still in the pipe, up to the cap, without
// waiting for a grandchild that may hold the pipe open.
void drain(int read_fd, ChildOutcome& outcome) {
    char buffer[4096];
    const int flags = fcntl(read_fd, F_GETFL);
    fcntl(read_fd, F_SETFL, flags | O_NONBLOCK);
    for (;;) {
        const ssize_t n = read(read_fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 || !keep_output(outcome, buffer, n)) return;
    }
}

// Reads the child's pipe until the child exits, its output passes kChildOutputLimit or the limit
// passes; then kills the child's whole process group and reaps the child. Its exit ends the
// reading even while a grandchild holds the pipe open or keeps writing to it.
ChildOutcome collect(pid_t pid, int read_fd, std::chrono::milliseconds limit) {
    ChildOutcome outcome;
    const Clock::time_point deadline = Clock::now() + limit;
    bool killed = false;
    int status = 0;
    char buffer[4096];
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) {
            killed = true;
            break;
        }
        // WNOWAIT: the exited child stays a zombie until the group kill below, so its pid, and with
        // it the group id, cannot be reused by an unrelated process that the kill would then hit.
        siginfo_t exited{};
        if (waitid(P_PID, static_cast<id_t>(pid), &exited, WEXITED | WNOHANG | WNOWAIT) == 0 && exited.si_pid == pid) {
            drain(read_fd, outcome);
            break;
        }
        // Short polls, so that the child's exit is seen soon after it happens.
        pollfd fd{read_fd, POLLIN, 0};
        const int ready = poll(&fd, 1, static_cast<int>(std::min<long long>(left.count(), 50)));
        if (ready < 0 && errno != EINTR) break;
        if (ready > 0) {
            const ssize_t n = read(read_fd, buffer, sizeof buffer);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            if (!keep_output(outcome, buffer, n)) break;
        }
    }
    kill(-pid, SIGKILL);
    close(read_fd);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (outcome.output_capped) {
        outcome.status = ChildOutcome::Status::output_too_long;
    } else if (killed) {
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
        case Status::output_too_long:
            return "killed after writing more than " + std::to_string(kChildOutputLimit) + " bytes";
        case Status::crashed: return "crashed with signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
        case Status::could_not_start: return "could not start: " + output;
    }
    return "unknown";
}

namespace {

// How long killed descendants get to die and be reaped; one stuck in the kernel is left behind.
constexpr std::chrono::seconds kDescendantReapLimit{2};

// A process that leaves the child's group (a driver daemon calling setsid() in cuInit) escapes
// the group kill. While this lives, this process is a child subreaper: whatever the child leaves
// behind when it dies is re-parented here, whichever group or session it moved to, rather than
// to init, so that end_orphaned_descendants finds it.
class SubreaperScope {
public:
    SubreaperScope() {
        prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper_);
        prctl(PR_SET_CHILD_SUBREAPER, 1);
    }
    ~SubreaperScope() {
        if (!was_subreaper_) prctl(PR_SET_CHILD_SUBREAPER, 0);
    }
    SubreaperScope(const SubreaperScope&) = delete;
    SubreaperScope& operator=(const SubreaperScope&) = delete;

private:
    int was_subreaper_ = 0;
};

// This process's children, from /proc/<pid>/stat (the parent pid is the second field after the
// command name's closing parenthesis; the name itself may hold spaces and parentheses).
std::vector<pid_t> own_children() {
    std::vector<pid_t> children;
    DIR* proc = opendir("/proc");
    if (proc == nullptr) return children;
    const pid_t self = getpid();
    while (const dirent* entry = readdir(proc)) {
        const std::optional<int> pid = parse_small_uint(entry->d_name);
        if (!pid) continue;
        const std::optional<std::string> stat = read_text_file("/proc/" + std::to_string(*pid) + "/stat");
        const size_t name_end = stat ? stat->rfind(')') : std::string::npos;
        if (name_end == std::string::npos) continue;
        std::istringstream fields(stat->substr(name_end + 1));
        char state = 0;
        long parent = 0;
        if (fields >> state >> parent && parent == self) children.push_back(*pid);
    }
    closedir(proc);
    return children;
}

// This process's children but those in `earlier`.
std::vector<pid_t> children_since(const std::vector<pid_t>& earlier) {
    std::vector<pid_t> children = own_children();
    children.erase(std::remove_if(children.begin(), children.end(),
                                  [&earlier](pid_t pid) {
                                      return std::find(earlier.begin(), earlier.end(), pid) != earlier.end();
                                  }),
                   children.end());
    return children;
}

// Once the child is reaped, this process's children other than `earlier` (those it had before the
// fork, such as a job of a shell that exec'd the helper) are what the child left behind: kills
// and reaps them. Killing one re-parents its own children here in turn, so this repeats until
// none is left (or, for one stuck in the kernel, until kDescendantReapLimit).
void end_orphaned_descendants(const std::vector<pid_t>& earlier) {
    const Clock::time_point give_up = Clock::now() + kDescendantReapLimit;
    for (std::vector<pid_t> orphans = children_since(earlier); !orphans.empty() && Clock::now() < give_up;
         orphans = children_since(earlier)) {
        for (const pid_t orphan : orphans) kill(orphan, SIGKILL);
        for (const pid_t orphan : orphans) {
            while (waitpid(orphan, nullptr, WNOHANG) == 0 && Clock::now() < give_up) usleep(1000);
        }
    }
}

// Forks; the child runs `in_child(write_fd)` and must not return. The parent collects what the
// child writes to the pipe until it exits or the limit passes, then ends every descendant.
ChildOutcome fork_and_collect(const std::function<void(int)>& in_child, std::chrono::milliseconds limit) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        return {ChildOutcome::Status::could_not_start, -1, 0, std::string("pipe: ") + std::strerror(errno)};
    }
    const SubreaperScope subreaper;
    const std::vector<pid_t> earlier_children = own_children();
    const pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return {ChildOutcome::Status::could_not_start, -1, 0, std::string("fork: ") + std::strerror(errno)};
    }
    if (pid == 0) {
        close(fds[0]);
        // A group of its own, so that the parent can kill whatever it starts; stdin, stdout and
        // stderr on /dev/null, so that nothing it leaves behind holds the helper's output open.
        setpgid(0, 0);
        const int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, STDIN_FILENO);
            dup2(devnull, STDOUT_FILENO);
            dup2(devnull, STDERR_FILENO);
        }
        in_child(fds[1]);
        _exit(0);
    }
    // Also set here: the parent may kill the group before the child ran its own setpgid.
    setpgid(pid, pid);
    close(fds[1]);
    ChildOutcome outcome = collect(pid, fds[0], limit);
    end_orphaned_descendants(earlier_children);
    return outcome;
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
            execvp(c_argv[0], c_argv.data());
            _exit(127);
        },
        limit);
}

}  // namespace culina
