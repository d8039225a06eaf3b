#include "fetch/wheel_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "fetch/fetch_error.h"

namespace culina::fetch {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int error) {
    throw FetchError(FetchError::Kind::local, "cannot " + what + " " + path + ": " + std::strerror(error) +
                                                  "; make the cache writable or set CULINA_CACHE_DIR to another folder");
}

}  // namespace

CachePaths cache_paths(const std::string& cache_root, const std::string& file) {
    const std::filesystem::path directory = std::filesystem::path(cache_root) / "wheels";
    CachePaths paths;
    paths.directory = directory.string();
    paths.wheel = (directory / file).string();
    paths.part = paths.wheel + ".part";
    paths.lock = paths.wheel + ".lock";
    return paths;
}

void ensure_cache_directory(const std::string& directory) {
    std::error_code error;
    std::filesystem::create_directories(directory, error);
    if (error) fail("create the cache folder", directory, error.value());
}

CacheLock::CacheLock(const std::string& path, const std::function<void()>& waiting) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("open the lock file", path, errno);
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
    if (errno != EWOULDBLOCK) {
        const int error = errno;
        ::close(fd_);
        fail("lock", path, error);
    }
    waiting();
    while (::flock(fd_, LOCK_EX) != 0) {
        if (errno == EINTR) continue;
        const int error = errno;
        ::close(fd_);
        fail("lock", path, error);
    }
}

CacheLock::~CacheLock() { ::close(fd_); }

void publish_file(const std::string& from, const std::string& to) {
    if (std::rename(from.c_str(), to.c_str()) != 0) fail("rename " + from + " to", to, errno);
}

void discard_file(const std::string& path) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail("delete", path, errno);
}

}  // namespace culina::fetch
