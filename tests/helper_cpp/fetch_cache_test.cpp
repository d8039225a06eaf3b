#include <gtest/gtest.h>

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "fetch/fetch_error.h"
#include "fetch/wheel_cache.h"
#include "shared_case_file.h"

namespace culina::fetch {
namespace {

// Every test's folder sits under one folder per process, removed when the tests end.
std::string scratch_root() {
    return testing::TempDir() + "/culina_fetch_cache_" + std::to_string(::getpid());
}

class ScratchRootRemoval : public testing::Environment {
public:
    void TearDown() override {
        std::error_code ignored;
        std::filesystem::remove_all(scratch_root(), ignored);
    }
};

const testing::Environment* const scratch_root_removal = testing::AddGlobalTestEnvironment(new ScratchRootRemoval);

std::string fresh_dir(const std::string& name) {
    const std::string dir = scratch_root() + "/" + name;
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

TEST(WheelCache, APlantedFifoIsRefusedWithoutWaitingForAWriter) {
    const std::string fifo = fresh_dir("fifo") + "/x.whl";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const auto started = std::chrono::steady_clock::now();
    EXPECT_THROW(open_own_file(fifo, O_RDONLY, false), FetchError);
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
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

// Every entry under `folder` with its owner and mode: what creating or changing anything alters.
std::map<std::string, std::pair<uid_t, mode_t>> listing(const std::string& folder) {
    std::map<std::string, std::pair<uid_t, mode_t>> entries;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(folder)) {
        struct stat info {};
        if (::lstat(entry.path().c_str(), &info) == 0) entries[entry.path().string()] = {info.st_uid, info.st_mode};
    }
    return entries;
}

// The shared cases, which the adapter's tests run too: each builds its chain of folders and
// links under a fresh base folder and asks whether the cache root there may be used.
TEST(CacheTrust, SharedCases) {
    if (::geteuid() != 0) GTEST_SKIP() << "the cases give folders to other users: run as root";
    const passwd* nobody = ::getpwnam("nobody");
    ASSERT_NE(nobody, nullptr);
    const nlohmann::json cases = read_case_file("cache_trust_cases.json").at("cases");
    ASSERT_FALSE(cases.empty());
    int index = 0;
    for (const nlohmann::json& item : cases) {
        const std::string name = item.at("name");
        SCOPED_TRACE(name);
        const std::string base = std::filesystem::canonical(fresh_dir("trust_" + std::to_string(index++))).string();
        for (const nlohmann::json& entry : item.at("chain")) {
            const std::string path = base + "/" + entry.at("name").get<std::string>();
            const std::string owner = entry.at("owner");
            const uid_t uid = owner == "self" ? ::geteuid() : owner == "root" ? 0 : nobody->pw_uid;
            const gid_t gid = owner == "nobody" ? nobody->pw_gid : ::getegid();
            if (entry.at("link_to").is_null()) {
                ASSERT_EQ(::mkdir(path.c_str(), 0700), 0) << path;
                ASSERT_EQ(::chown(path.c_str(), uid, gid), 0) << path;
                ASSERT_EQ(::chmod(path.c_str(), std::stoul(entry.at("mode").get<std::string>(), nullptr, 8)), 0) << path;
            } else {
                ASSERT_EQ(::symlink(entry.at("link_to").get<std::string>().c_str(), path.c_str()), 0) << path;
                ASSERT_EQ(::lchown(path.c_str(), uid, gid), 0) << path;
            }
        }
        const auto before = listing(base);
        const std::string cache = base + "/" + item.at("cache").get<std::string>();
        const std::optional<std::string> problem = cache_root_problem(cache);
        if (item.at("trusted").get<bool>()) {
            EXPECT_EQ(problem, std::nullopt);
            struct stat wheels {};
            ASSERT_EQ(::lstat((cache + "/wheels").c_str(), &wheels), 0) << "the wheels folder is there";
            EXPECT_TRUE(S_ISDIR(wheels.st_mode));
            EXPECT_EQ(wheels.st_mode & 022, 0u);
        } else {
            ASSERT_NE(problem, std::nullopt);
            const std::string named = base + "/" + item.at("problem_mentions").get<std::string>() + " ";
            EXPECT_NE(problem->find(named), std::string::npos) << "expected '" << named << "' in: " << *problem;
            EXPECT_EQ(listing(base), before) << "nothing is created or changed when the cache is refused";
        }
        std::filesystem::remove_all(base);
    }
}

TEST(CacheTrust, TheRootFolderAndSystemFoldersAreRefused) {
    const std::vector<std::string> roots =
        read_case_file("cache_trust_cases.json").at("system_folders").get<std::vector<std::string>>();
    ASSERT_FALSE(roots.empty());
    for (const std::string& root : roots) {
        const bool wheels_there = std::filesystem::exists(std::filesystem::path(root) / "wheels");
        const auto problem = cache_root_problem(root);
        ASSERT_NE(problem, std::nullopt) << root;
        const bool top = std::filesystem::path(root).lexically_normal() == "/";
        EXPECT_NE(problem->find(top ? "/ is the root folder" : "is a system folder"), std::string::npos) << *problem;
        EXPECT_EQ(std::filesystem::exists(std::filesystem::path(root) / "wheels"), wheels_there) << root;
    }
}

TEST(CacheTrust, ALinkToASystemFolderIsRefused) {
    const std::string dir = std::filesystem::canonical(fresh_dir("to_system")).string();
    std::filesystem::create_directory_symlink("/usr", dir + "/cache");
    const auto problem = cache_root_problem(dir + "/cache");
    ASSERT_NE(problem, std::nullopt);
    EXPECT_NE(problem->find(dir + "/cache leads to a system folder: /usr is a system folder"), std::string::npos)
        << *problem;
}

TEST(CacheTrust, CreatedFoldersGetTheirModeAndExistingOnesKeepTheirs) {
    const std::string dir = std::filesystem::canonical(fresh_dir("modes")).string();
    ::chmod(dir.c_str(), 0750);
    const mode_t umask_before = ::umask(077);
    EXPECT_EQ(trusted_folder_problem(dir + "/release/x86", FolderRule{false, 0755}), std::nullopt);
    EXPECT_EQ(cache_root_problem(dir + "/cache"), std::nullopt);
    ::umask(umask_before);
    struct stat info {};
    for (const char* created : {"/release", "/release/x86"}) {
        ASSERT_EQ(::stat((dir + created).c_str(), &info), 0);
        EXPECT_EQ(info.st_mode & 07777, 0755u) << created;
    }
    for (const char* created : {"/cache", "/cache/wheels"}) {
        ASSERT_EQ(::stat((dir + created).c_str(), &info), 0);
        EXPECT_EQ(info.st_mode & 07777, 0700u) << created;
    }
    ASSERT_EQ(::stat(dir.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 07777, 0750u) << "an existing folder keeps its mode";
}

TEST(CacheTrust, TheFolderItselfMayBeALinkOnlyWhenTheRuleSaysSo) {
    const std::string dir = std::filesystem::canonical(fresh_dir("final_link")).string();
    std::filesystem::create_directory(dir + "/real");
    ::chmod((dir + "/real").c_str(), 0700);
    std::filesystem::create_directory_symlink("real", dir + "/link");
    EXPECT_EQ(trusted_folder_problem(dir + "/link", FolderRule{true, 0700}), std::nullopt);
    const auto problem = trusted_folder_problem(dir + "/link", FolderRule{false, 0755});
    ASSERT_NE(problem, std::nullopt);
    EXPECT_NE(problem->find(dir + "/link is a symbolic link, not a folder"), std::string::npos) << *problem;
    std::filesystem::create_symlink("loop", dir + "/loop");
    EXPECT_NE(trusted_folder_problem(dir + "/loop/cache", FolderRule{true, 0700}), std::nullopt) << "a link loop ends";
}

TEST(CacheTrust, AFileOnTheWayIsNamed) {
    const std::string dir = std::filesystem::canonical(fresh_dir("blocked")).string();
    std::ofstream(dir + "/file") << "not a folder";
    const auto problem = cache_root_problem(dir + "/file/cache");
    ASSERT_NE(problem, std::nullopt);
    EXPECT_NE(problem->find(dir + "/file is a file, not a folder"), std::string::npos) << *problem;
}

}  // namespace
}  // namespace culina::fetch
