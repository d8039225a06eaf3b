// The wheel cache on disk: <cache root>/wheels/<file>, a `.part` file next to it while it
// downloads and a `.lock` file that several installs running at once take in turn (flock), so
// that one downloads and the others find the verified file.
#pragma once

#include <functional>
#include <string>

namespace culina::fetch {

struct CachePaths {
    std::string directory;  // <root>/wheels
    std::string wheel;      // <root>/wheels/<file>
    std::string part;       // <root>/wheels/<file>.part
    std::string lock;       // <root>/wheels/<file>.lock
};

CachePaths cache_paths(const std::string& cache_root, const std::string& file);

// Creates the folder (and parents); throws FetchError(local) naming it and the fix.
void ensure_cache_directory(const std::string& directory);

// Exclusive flock on the lock file for the object's lifetime. When another process holds it,
// says so through `waiting` and then blocks until it is released.
class CacheLock {
public:
    CacheLock(const std::string& path, const std::function<void()>& waiting);
    ~CacheLock();
    CacheLock(const CacheLock&) = delete;
    CacheLock& operator=(const CacheLock&) = delete;

private:
    int fd_ = -1;
};

// Renames `from` to `to`: atomic within one file system, so readers see no file or the whole
// one. No fsync: a cached wheel is verified again before every use, so one damaged by a power
// loss is caught then, and a multi-hundred-MiB flush is not paid on every install.
// Throws FetchError(local).
void publish_file(const std::string& from, const std::string& to);

// Removes a file; a missing file is fine. Throws FetchError(local) when it stays.
void discard_file(const std::string& path);

}  // namespace culina::fetch
