#include "fetch/local_copy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/sha256.h"
#include "fetch/fetch_error.h"
#include "fetch/wheel_cache.h"

namespace culina::fetch {
namespace {

[[noreturn]] void local_failure(const std::string& what, const std::string& path) {
    throw FetchError(FetchError::Kind::local, "cannot " + what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

DownloadResult copy_local_asset(const std::string& source, const std::string& part_path, std::uint64_t expected_size,
                                const SettingNames& names) {
    const Descriptor in(::open(source.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (in.get() < 0) {
        if (errno == ENOENT) {
            throw FetchError(FetchError::Kind::unavailable,
                             source + " does not exist: the release folder (" + names.of("RELEASE_URL") + ") lacks this wheel; "
                                      "fill it with `culina-resolver mirror`");
        }
        local_failure("read the release folder's", source);
    }
    struct stat info {};
    if (::fstat(in.get(), &info) != 0) local_failure("examine", source);
    if (!S_ISREG(info.st_mode)) {
        throw FetchError(FetchError::Kind::verification, source + " is not a regular file: refill the release folder");
    }
    if (static_cast<std::uint64_t>(info.st_size) != expected_size) {
        throw FetchError(FetchError::Kind::verification,
                         source + " holds " + std::to_string(info.st_size) + " bytes but the manifest's size is " +
                             std::to_string(expected_size) + ": refill the release folder with `culina-resolver mirror`");
    }
    const Descriptor out(open_own_file(part_path, O_WRONLY | O_TRUNC, true));
    Sha256 hasher;
    std::string chunk(1 << 20, '\0');
    std::uint64_t copied = 0;
    // Never more than the manifest's size, even when the file grows while it is read.
    while (copied < expected_size) {
        const ssize_t got = ::read(in.get(), chunk.data(), std::min<std::uint64_t>(chunk.size(), expected_size - copied));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) local_failure("read", source);
        if (got == 0) break;
        hasher.update(chunk.data(), static_cast<std::size_t>(got));
        for (ssize_t done = 0; done < got;) {
            const ssize_t written = ::write(out.get(), chunk.data() + done, static_cast<std::size_t>(got - done));
            if (written < 0 && errno == EINTR) continue;
            if (written < 0) local_failure("write", part_path);
            done += written;
        }
        copied += static_cast<std::uint64_t>(got);
    }
    if (copied != expected_size) {
        throw FetchError(FetchError::Kind::verification, source + " ended after " + std::to_string(copied) +
                                                             " bytes, the manifest's size is " + std::to_string(expected_size));
    }
    DownloadResult result;
    result.sha256 = hasher.finish_hex();
    result.received = copied;
    result.attempts = 1;
    return result;
}

}  // namespace culina::fetch
