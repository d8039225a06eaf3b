// The wheel cache on disk: <cache root>/wheels/<file>, a `.part` file next to it while it
// downloads and a `.lock` file that several installs running at once take in turn (flock), so
// that one downloads and the others find the verified file.
//
// The cache is not trusted: another user may have created it or planted links in it. A cache
// folder is used only when this user owns it and nobody else may write to it; every file in it
// is opened without following links and checked to be a regular file of ours before it is read
// or written; the lock is waited on for a bounded time. When the cache cannot be used, the
// fetch goes on in a private temporary folder instead.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace culina::fetch {

struct CachePaths {
    std::string directory;  // <root>/wheels
    std::string wheel;      // <root>/wheels/<file>
    std::string part;       // <root>/wheels/<file>.part
    std::string lock;       // <root>/wheels/<file>.lock
};

// The paths for `file` in `directory`.
CachePaths paths_in(const std::string& directory, const std::string& file);
// The paths for `file` in the cache at `cache_root`: paths_in(<cache_root>/wheels, file).
CachePaths cache_paths(const std::string& cache_root, const std::string& file);

// Creates the missing folders of `directory` with mode 0700; throws FetchError(local) naming it
// and the fix when it cannot.
void ensure_cache_directory(const std::string& directory);

// nullopt when `directory` is a folder (a link to one only when `follow_link`) that this user
// owns and that neither group nor others may write; otherwise why it cannot be trusted.
std::optional<std::string> untrusted_folder_problem(const std::string& directory, bool follow_link);

// nullopt when `path` is missing or a regular file of ours with one link and no write access
// for others; otherwise what it is. Nothing is followed.
std::optional<std::string> untrusted_entry_problem(const std::string& path);

// Opens `path` with O_NOFOLLOW (and O_CREAT when `create`, mode 0600) and checks that it is a
// regular file of ours with one link. Returns the descriptor; throws FetchError(local) naming
// the path, what it is and the fix.
int open_own_file(const std::string& path, int flags, bool create);

// Exclusive flock on the lock file while the object lives. When another process holds it, says
// so through `waiting` and tries again until `wait_limit` has passed; held() tells whether it got it.
class CacheLock {
public:
    CacheLock(const std::string& path, std::chrono::milliseconds wait_limit, const std::function<void()>& waiting);
    ~CacheLock();
    CacheLock(const CacheLock&) = delete;
    CacheLock& operator=(const CacheLock&) = delete;

    bool held() const { return held_; }

private:
    int fd_ = -1;
    bool held_ = false;
};

// A folder of its own under $TMPDIR (mkdtemp: new, 0700), for a fetch that cannot use the cache.
// Throws FetchError(local).
std::string make_private_folder(const std::string& prefix);

// Renames `from` to `to`: atomic within one file system, so readers see no file or the whole
// one, and a link planted at `to` is replaced, never written through. No fsync: a cached wheel
// is verified again before every use, so one damaged by a power loss is caught then, and a
// multi-hundred-MiB flush is not paid on every install. Throws FetchError(local).
void publish_file(const std::string& from, const std::string& to);

// Removes a file (a link itself, never its target); a missing file is fine. Throws
// FetchError(local) when it stays.
void discard_file(const std::string& path);

}  // namespace culina::fetch
