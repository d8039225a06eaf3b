#include "fetch/wheel_cache.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <set>
#include <thread>
#include <vector>

#include "common/text.h"
#include "fetch/fetch_error.h"

namespace culina::fetch {
namespace {

constexpr auto kLockPollInterval = std::chrono::milliseconds(100);
constexpr int kMaxLinksFollowed = 40;  // as the kernel's path lookup (ELOOP)

[[noreturn]] void fail(const std::string& what, const std::string& path, int error) {
    throw FetchError(FetchError::Kind::local, "cannot " + what + " " + path + ": " + std::strerror(error) +
                                                  "; make the cache writable, or choose another cache folder (the CACHE_DIR setting)");
}

std::string kind_of(mode_t mode) {
    if (S_ISLNK(mode)) return "a symbolic link";
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISREG(mode)) return "a file";
    return "a special file";
}

// nullopt when the file described by `info` is a regular file of ours, with one link, that
// nobody else may write.
std::optional<std::string> foreign_file_problem(const struct stat& info) {
    if (!S_ISREG(info.st_mode)) return "it is " + kind_of(info.st_mode) + ", not a regular file";
    if (info.st_uid != ::geteuid()) return "it belongs to user id " + std::to_string(info.st_uid) + ", not to this user";
    if (info.st_nlink != 1) return "it has " + std::to_string(info.st_nlink) + " hard links";
    if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) return "group or others may write it";
    return std::nullopt;
}

std::string mode_text(mode_t mode) {
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
    return text;
}

std::string this_user() { return "this user (id " + std::to_string(::geteuid()) + ")"; }

bool ours_or_roots(uid_t owner) { return owner == ::geteuid() || owner == 0; }

// / and the folders the system keeps its own files in: its top-level folders and those directly
// in /usr and /var. Deeper ones (/var/cache/culina, /var/tmp/x, /home/me) are left to the chain
// rule.
bool is_system_folder(const std::filesystem::path& folder) {
    static const std::set<std::string> kTopLevel = {
        "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "media", "mnt",
        "opt", "proc", "root", "run", "sbin", "srv", "sys", "tmp", "usr", "var"};
    std::vector<std::string> parts;
    for (const std::filesystem::path& part : folder.relative_path()) {
        if (!part.empty()) parts.push_back(part.string());
    }
    if (parts.empty()) return true;
    if (parts.size() == 1) return kTopLevel.count(parts[0]) > 0;
    return parts.size() == 2 && (parts[0] == "usr" || parts[0] == "var");
}

std::optional<std::string> system_folder_problem(const std::filesystem::path& folder) {
    if (folder == folder.root_path()) return std::string("/ is the root folder, which must not hold the helper's files");
    return folder.string() + " is a system folder (/ and its top-level folders, and the folders directly in /usr and "
                             "/var), which must not hold the helper's files";
}

std::optional<std::string> link_problem(const std::filesystem::path& path, const struct stat& info) {
    if (ours_or_roots(info.st_uid)) return std::nullopt;
    return path.string() + " is a symbolic link owned by user id " + std::to_string(info.st_uid) + ", neither " +
           this_user() + " nor root: another user planted it";
}

// A folder on the way: whoever may change it may rename what lies below it and put their own
// in its place. A root-owned sticky folder (/tmp) lets nobody rename or delete what is not theirs.
std::optional<std::string> folder_above_problem(const std::filesystem::path& path, const struct stat& info) {
    if (!S_ISDIR(info.st_mode)) return path.string() + " is " + kind_of(info.st_mode) + ", not a folder";
    if (!ours_or_roots(info.st_uid)) {
        return path.string() + " belongs to user id " + std::to_string(info.st_uid) + ", neither " + this_user() +
               " nor root: its owner could replace what lies below it";
    }
    const bool sticky_root = info.st_uid == 0 && (info.st_mode & S_ISVTX) != 0;
    if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !sticky_root) {
        return path.string() + " may be written by group or others (mode " + mode_text(info.st_mode) +
               ", not a root-owned sticky folder like /tmp): they could replace what lies below it";
    }
    return std::nullopt;
}

std::optional<std::string> own_folder_problem(const std::filesystem::path& path, const struct stat& info) {
    if (!S_ISDIR(info.st_mode)) return path.string() + " is " + kind_of(info.st_mode) + ", not a folder";
    if (info.st_uid != ::geteuid()) {
        return path.string() + " belongs to user id " + std::to_string(info.st_uid) + ", not to " + this_user();
    }
    if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        return path.string() + " may be written by group or others (mode " + mode_text(info.st_mode) + ")";
    }
    return std::nullopt;
}

struct Chain {
    std::optional<std::string> problem;
    std::filesystem::path resolved;              // the folder, every link on the way resolved
    std::vector<std::filesystem::path> missing;  // what has to be created, outermost first
};

// Walks `folder` (absolute, normal) from / as path lookup does, following links by hand so that
// each one and every folder it leads through is checked.
Chain inspect_chain(const std::filesystem::path& folder, bool may_be_link) {
    Chain chain;
    if (!folder.is_absolute()) {
        chain.problem = folder.string() + " is not an absolute path";
        return chain;
    }
    std::deque<std::string> pending;
    for (const std::filesystem::path& part : folder.relative_path()) {
        if (!part.empty()) pending.push_back(part.string());
    }
    // Nothing but "." left: the component just taken is the folder itself.
    const auto is_last = [&pending] {
        return std::all_of(pending.begin(), pending.end(),
                           [](const std::string& part) { return part.empty() || part == "."; });
    };
    std::filesystem::path current = folder.root_path();
    struct stat info {};
    if (!pending.empty()) {
        if (::lstat(current.c_str(), &info) != 0) {
            chain.problem = current.string() + " cannot be examined: " + std::strerror(errno);
            return chain;
        }
        if ((chain.problem = folder_above_problem(current, info))) return chain;
    }
    int links_followed = 0;
    while (!pending.empty()) {
        const std::string name = pending.front();
        pending.pop_front();
        if (name == "." || name.empty()) continue;
        if (name == "..") {
            if (!chain.missing.empty()) chain.missing.pop_back();
            current = current.parent_path();
            continue;
        }
        const std::filesystem::path next = current / name;
        if (!chain.missing.empty()) {
            chain.missing.push_back(next);
            current = next;
            continue;
        }
        if (::lstat(next.c_str(), &info) != 0) {
            if (errno != ENOENT) {
                chain.problem = next.string() + " cannot be examined: " + std::strerror(errno);
                return chain;
            }
            chain.missing.push_back(next);
            current = next;
            continue;
        }
        if (S_ISLNK(info.st_mode)) {
            if (is_last() && !may_be_link) {
                chain.problem = next.string() + " is a symbolic link, not a folder";
                return chain;
            }
            if ((chain.problem = link_problem(next, info))) return chain;
            std::error_code error;
            const std::filesystem::path target = std::filesystem::read_symlink(next, error);
            if (error || ++links_followed > kMaxLinksFollowed) {
                chain.problem = next.string() + " is a symbolic link that cannot be followed: " +
                                (error ? error.message() : "more than " + std::to_string(kMaxLinksFollowed) + " links");
                return chain;
            }
            std::vector<std::string> target_parts;
            for (const std::filesystem::path& part : target.relative_path()) target_parts.push_back(part.string());
            pending.insert(pending.begin(), target_parts.begin(), target_parts.end());
            if (target.is_absolute()) current = target.root_path();
            continue;
        }
        if (!is_last()) {
            if ((chain.problem = folder_above_problem(next, info))) return chain;
        }
        current = next;
    }
    chain.resolved = current;
    if (chain.missing.empty()) {
        if (::lstat(current.c_str(), &info) != 0) {
            chain.problem = current.string() + " cannot be examined: " + std::strerror(errno);
        } else {
            chain.problem = own_folder_problem(current, info);
        }
    }
    return chain;
}

}  // namespace

CachePaths paths_in(const std::string& directory, const std::string& file) {
    CachePaths paths;
    paths.directory = directory;
    paths.wheel = (std::filesystem::path(directory) / file).string();
    paths.part = paths.wheel + ".part";
    paths.lock = paths.wheel + ".lock";
    return paths;
}

CachePaths cache_paths(const std::string& cache_root, const std::string& file) {
    return paths_in((std::filesystem::path(cache_root) / "wheels").string(), file);
}

std::optional<std::string> trusted_folder_problem(const std::string& folder, const FolderRule& rule) {
    std::filesystem::path normal = std::filesystem::path(folder).lexically_normal();
    if (!normal.has_filename() && normal.has_parent_path() && normal != normal.root_path()) normal = normal.parent_path();
    if (is_system_folder(normal)) return system_folder_problem(normal);
    const Chain chain = inspect_chain(normal, rule.may_be_link);
    if (chain.problem) return chain.problem;
    if (is_system_folder(chain.resolved)) {
        return normal.string() + " leads to a system folder: " + *system_folder_problem(chain.resolved);
    }
    for (std::size_t index = 0; index < chain.missing.size(); ++index) {
        const std::filesystem::path& missing = chain.missing[index];
        const bool created = ::mkdir(missing.c_str(), rule.created_mode) == 0;
        // EEXIST: another install made it between the walk and now; it is checked like any other.
        if (!created && errno != EEXIST) return missing.string() + " cannot be created: " + std::strerror(errno);
        if (created && ::chmod(missing.c_str(), rule.created_mode) != 0) {
            return missing.string() + " cannot be given mode " + mode_text(rule.created_mode) + ": " + std::strerror(errno);
        }
        struct stat info {};
        if (::lstat(missing.c_str(), &info) != 0) return missing.string() + " cannot be examined: " + std::strerror(errno);
        const bool last = index + 1 == chain.missing.size();
        if (auto problem = last ? own_folder_problem(missing, info) : folder_above_problem(missing, info)) return problem;
    }
    return std::nullopt;
}

std::optional<std::string> cache_root_problem(const std::string& root) {
    if (auto problem = trusted_folder_problem(root, FolderRule{true, 0700})) return problem;
    return trusted_folder_problem((std::filesystem::path(root) / "wheels").string(), FolderRule{false, 0700});
}

std::optional<std::string> untrusted_entry_problem(const std::string& path) {
    struct stat info {};
    if (::lstat(path.c_str(), &info) != 0) {
        if (errno == ENOENT) return std::nullopt;
        return std::string("it cannot be examined: ") + std::strerror(errno);
    }
    return foreign_file_problem(info);
}

int open_own_file(const std::string& path, int flags, bool create) {
    // O_NONBLOCK: a FIFO planted where a file is expected must not hang the open (the fstat below
    // then refuses it); on a regular file the flag changes nothing.
    const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (create ? O_CREAT : 0), 0600);
    if (fd < 0) {
        if (errno == ELOOP) {
            throw FetchError(FetchError::Kind::local, path + " is a symbolic link, which the cache never follows: "
                                                             "delete it, or choose a cache folder of your own (the CACHE_DIR setting)");
        }
        fail("open", path, errno);
    }
    struct stat info {};
    std::optional<std::string> problem;
    if (::fstat(fd, &info) != 0) {
        problem = std::string("it cannot be examined: ") + std::strerror(errno);
    } else {
        problem = foreign_file_problem(info);
    }
    if (problem) {
        ::close(fd);
        throw FetchError(FetchError::Kind::local, "will not use " + path + ": " + *problem +
                                                      "; delete it, or choose a cache folder of your own (the CACHE_DIR setting)");
    }
    return fd;
}

CacheLock::CacheLock(const std::string& path, std::chrono::milliseconds wait_limit,
                     const std::function<void()>& waiting) {
    fd_ = open_own_file(path, O_RDWR, true);
    const auto deadline = std::chrono::steady_clock::now() + wait_limit;
    bool said = false;
    for (;;) {
        if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
            held_ = true;
            return;
        }
        if (errno != EWOULDBLOCK && errno != EINTR) {
            const int error = errno;
            ::close(fd_);
            fail("lock", path, error);
        }
        if (std::chrono::steady_clock::now() >= deadline) return;
        if (!said) {
            waiting();
            said = true;
        }
        std::this_thread::sleep_for(kLockPollInterval);
    }
}

CacheLock::~CacheLock() { ::close(fd_); }

std::string make_private_folder(const std::string& prefix) {
    const std::optional<std::string> tmp = get_env("TMPDIR");
    std::string pattern = (tmp && !tmp->empty() ? *tmp : std::string("/tmp")) + "/" + prefix + "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
        throw FetchError(FetchError::Kind::local, "cannot create a temporary folder from " + pattern + ": " +
                                                      std::strerror(errno) + "; set TMPDIR to a writable folder");
    }
    if (const auto problem = cache_root_problem(pattern)) {
        ::rmdir(pattern.c_str());
        throw FetchError(FetchError::Kind::local, "cannot use the private folder " + pattern + ": " + *problem +
                                                      "; set TMPDIR to a folder that only you (or root) may write");
    }
    return pattern;
}

Descriptor::~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
}

void publish_file(const std::string& from, const std::string& to) {
    if (std::rename(from.c_str(), to.c_str()) != 0) fail("rename " + from + " to", to, errno);
}

void discard_file(const std::string& path) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail("delete", path, errno);
}

}  // namespace culina::fetch
