#include "fetch/wheel_cache.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "common/text.h"
#include "fetch/fetch_error.h"

namespace culina::fetch {
namespace {

constexpr auto kLockPollInterval = std::chrono::milliseconds(100);

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

void ensure_cache_directory(const std::string& directory) {
    std::filesystem::path built;
    for (const std::filesystem::path& component : std::filesystem::path(directory)) {
        built /= component;
        if (::mkdir(built.c_str(), 0700) != 0 && errno != EEXIST) fail("create the cache folder", directory, errno);
    }
    struct stat info {};
    if (::stat(directory.c_str(), &info) != 0) fail("create the cache folder", directory, errno);
    if (!S_ISDIR(info.st_mode)) fail("create the cache folder", directory, ENOTDIR);
}

std::optional<std::string> untrusted_folder_problem(const std::string& directory, bool follow_link) {
    struct stat info {};
    if ((follow_link ? ::stat(directory.c_str(), &info) : ::lstat(directory.c_str(), &info)) != 0) {
        return directory + " cannot be examined: " + std::strerror(errno);
    }
    if (!S_ISDIR(info.st_mode)) return directory + " is " + kind_of(info.st_mode) + ", not a folder";
    if (info.st_uid != ::geteuid()) {
        return directory + " belongs to user id " + std::to_string(info.st_uid) + ", not to this user (id " +
               std::to_string(::geteuid()) + ")";
    }
    if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) return directory + " may be written by group or others";
    return std::nullopt;
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
    const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
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
    return pattern;
}

void publish_file(const std::string& from, const std::string& to) {
    if (std::rename(from.c_str(), to.c_str()) != 0) fail("rename " + from + " to", to, errno);
}

void discard_file(const std::string& path) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail("delete", path, errno);
}

}  // namespace culina::fetch
