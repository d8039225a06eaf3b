#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
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
        const CacheLock lock(lock_path, std::chrono::seconds(10), [&] { waited = true; });
        ::_exit(signalled && waited && lock.held() ? 0 : 1);
    }
    auto held = std::make_unique<CacheLock>(lock_path, std::chrono::seconds(10),
                                            [] { ADD_FAILURE() << "nobody holds it yet"; });
    ASSERT_TRUE(held->held());
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

TEST(WheelCache, LockHeldElsewhereIsGivenUpAfterTheLimit) {
    const std::string lock_path = fresh_dir("held") + "/x.whl.lock";
    const CacheLock holder(lock_path, std::chrono::seconds(1), [] {});
    ASSERT_TRUE(holder.held());
    // flock locks belong to the open file description: a second open in this process contends.
    bool waited = false;
    const auto started = std::chrono::steady_clock::now();
    const CacheLock second(lock_path, std::chrono::milliseconds(300), [&] { waited = true; });
    const auto took = std::chrono::steady_clock::now() - started;
    EXPECT_FALSE(second.held());
    EXPECT_TRUE(waited);
    EXPECT_GE(took, std::chrono::milliseconds(300));
    EXPECT_LT(took, std::chrono::seconds(2));
}

TEST(WheelCache, PlantedLinksAreNeverOpened) {
    const std::string dir = fresh_dir("links");
    const std::string victim = dir + "/victim";
    std::ofstream(victim) << "precious";
    for (const char* name : {"/x.whl.lock", "/x.whl.part"}) {
        std::filesystem::create_symlink(victim, dir + name);
        EXPECT_THROW(open_own_file(dir + name, O_RDWR, true), FetchError) << name;
        EXPECT_NE(untrusted_entry_problem(dir + name), std::nullopt);
    }
    std::filesystem::create_hard_link(victim, dir + "/x.whl");
    EXPECT_NE(untrusted_entry_problem(dir + "/x.whl"), std::nullopt) << "a hard link to another file";
    std::ifstream in(victim);
    std::string content;
    in >> content;
    EXPECT_EQ(content, "precious");
}

TEST(WheelCache, CreatedFoldersArePrivateAndOthersWritableOnesUntrusted) {
    const std::string dir = fresh_dir("modes");
    ensure_cache_directory(dir + "/root/wheels");
    struct stat info {};
    ASSERT_EQ(::stat((dir + "/root/wheels").c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0700u);
    EXPECT_EQ(untrusted_folder_problem(dir + "/root/wheels", false), std::nullopt);
    ::chmod((dir + "/root/wheels").c_str(), 0777);
    const auto problem = untrusted_folder_problem(dir + "/root/wheels", false);
    ASSERT_NE(problem, std::nullopt);
    EXPECT_NE(problem->find("group or others"), std::string::npos) << *problem;
    std::filesystem::create_directory_symlink(dir + "/root", dir + "/link");
    EXPECT_NE(untrusted_folder_problem(dir + "/link", false), std::nullopt) << "a link where a folder must be";
    EXPECT_EQ(untrusted_folder_problem(dir + "/link", true), std::nullopt) << "the root may be a link";
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
        EXPECT_NE(std::string(error.what()).find("the CACHE_DIR setting"), std::string::npos);
    }
}

}  // namespace
}  // namespace culina::fetch
