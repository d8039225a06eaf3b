#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "fetch/fetch_error.h"
#include "fetch/wheel_cache.h"

namespace culina::fetch {
namespace {

std::string fresh_dir(const std::string& name) {
    const std::string dir = testing::TempDir() + "/" + name + "_" + std::to_string(::getpid());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

TEST(WheelCache, PathsSitSideBySide) {
    const CachePaths paths = cache_paths("/c", "x.whl");
    EXPECT_EQ(paths.directory, "/c/wheels");
    EXPECT_EQ(paths.wheel, "/c/wheels/x.whl");
    EXPECT_EQ(paths.part, "/c/wheels/x.whl.part");
    EXPECT_EQ(paths.lock, "/c/wheels/x.whl.lock");
}

TEST(WheelCache, LockExcludesAnotherProcessUntilReleased) {
    const std::string lock_path = fresh_dir("lock") + "/x.whl.lock";
    // Fork before locking: a child that inherited the locked descriptor would share the lock.
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        char go = 0;
        const bool signalled = ::read(ready[0], &go, 1) == 1;
        bool waited = false;
        const CacheLock lock(lock_path, [&] { waited = true; });
        ::_exit(signalled && waited ? 0 : 1);
    }
    auto held = std::make_unique<CacheLock>(lock_path, [] { ADD_FAILURE() << "nobody holds it yet"; });
    const auto locked_at = std::chrono::steady_clock::now();
    ASSERT_EQ(::write(ready[1], "x", 1), 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    held.reset();
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the second process must have waited for the lock, and said so";
    EXPECT_GE(std::chrono::steady_clock::now() - locked_at, std::chrono::milliseconds(300));
    ::close(ready[0]);
    ::close(ready[1]);
}

TEST(WheelCache, PublishRenamesAndDiscardToleratesMissing) {
    const std::string dir = fresh_dir("publish");
    std::ofstream(dir + "/a.part") << "bytes";
    publish_file(dir + "/a.part", dir + "/a.whl");
    EXPECT_FALSE(std::filesystem::exists(dir + "/a.part"));
    EXPECT_TRUE(std::filesystem::exists(dir + "/a.whl"));
    discard_file(dir + "/a.whl");
    discard_file(dir + "/a.whl");
    EXPECT_FALSE(std::filesystem::exists(dir + "/a.whl"));
}

TEST(WheelCache, UnwritableCacheIsALocalErrorNamingTheFolder) {
    const std::string dir = fresh_dir("blocked");
    std::ofstream(dir + "/file") << "not a folder";
    try {
        ensure_cache_directory(dir + "/file/wheels");
        FAIL() << "expected an error";
    } catch (const FetchError& error) {
        EXPECT_EQ(error.kind, FetchError::Kind::local);
        EXPECT_NE(std::string(error.what()).find(dir + "/file/wheels"), std::string::npos) << error.what();
        EXPECT_NE(std::string(error.what()).find("CULINA_CACHE_DIR"), std::string::npos);
    }
}

}  // namespace
}  // namespace culina::fetch
