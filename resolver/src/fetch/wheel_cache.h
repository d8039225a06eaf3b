// The wheel cache on disk: <cache root>/wheels/<file>, a `.part` file next to it while it
// downloads and a `.lock` file that several installs running at once take in turn (flock), so
// that one downloads and the others find the verified file.
//
// The cache is not trusted: another user may have created it, a folder above it, or links in
// it. It is used only when nobody but this user and root can change what its path leads to
// (trusted_folder_problem); every file in it is opened without following links and checked to
// be a regular file of ours before it is read or written; the lock is waited on for a bounded
// time. When the cache cannot be used, the fetch goes on in a private temporary folder instead.
#pragma once

#include <sys/types.h>

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

// How trusted_folder_problem treats the folder itself.
struct FolderRule {
    bool may_be_link = false;   // the folder may be a link (ours or root's) to the real one: a cache moved to another disk
    mode_t created_mode = 0700;  // for the folders it creates (exactly, whatever the umask)
};

// The one rule for a folder the helper writes into as whoever runs it (root included): nullopt
// when nobody but this user and root can change what `folder` leads to; otherwise why not,
// naming the path at fault. Walking from / with lstat, component by component:
//  - a symbolic link must be owned by this user or root, and is followed (its target is walked
//    the same way); the folder itself may be one only when rule.may_be_link;
//  - every existing folder above it must be owned by this user or root and writable by neither
//    group nor others, except a root-owned sticky folder such as /tmp (others may not rename or
//    delete what they do not own in it);
//  - the folder itself must be a folder owned by this user, writable by neither group nor others;
//  - / and the system folders (/usr, /etc, /var/lib, ..., as given and as resolved) are refused.
// When all that holds, the missing folders are created with rule.created_mode, outermost first;
// when it does not, nothing is created. Existing folders keep their mode.
std::optional<std::string> trusted_folder_problem(const std::string& folder, const FolderRule& rule);

// The cache at `root`: trusted_folder_problem for the root (which may be a link) and then for
// <root>/wheels (which may not), creating them 0700. nullopt when the cache may be used.
std::optional<std::string> cache_root_problem(const std::string& root);

// nullopt when `path` is missing or a regular file of ours with one link and no write access
// for others; otherwise what it is. Nothing is followed.
std::optional<std::string> untrusted_entry_problem(const std::string& path);

// Opens `path` with O_NOFOLLOW (and O_CREAT when `create`, mode 0600) and checks that it is a
// regular file of ours with one link. Returns the descriptor; throws FetchError(local) naming
// the path, what it is and the fix.
int open_own_file(const std::string& path, int flags, bool create);

// Closes a descriptor when it goes out of scope, however the scope ends.
class Descriptor {
public:
    explicit Descriptor(int fd) : fd_(fd) {}
    ~Descriptor();
    Descriptor(const Descriptor&) = delete;
    Descriptor& operator=(const Descriptor&) = delete;
    int get() const { return fd_; }

private:
    int fd_;
};

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

// A folder of its own under $TMPDIR (mkdtemp: new, 0700) that passes cache_root_problem, its
// wheels/ folder created, for a fetch that cannot use the cache. Throws FetchError(local).
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
