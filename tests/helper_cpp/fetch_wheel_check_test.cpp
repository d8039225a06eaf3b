#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "fetch/fetch_error.h"
#include "fetch/fetch_wheel.h"
#include "common/sha256.h"
#include "fetch/wheel_cache.h"
#include "fetch/wheel_check.h"
#include "fetch/zip_reader.h"
#include "settings/helper_settings.h"

namespace culina::fetch {
namespace {

// "Metadata-Version: 2.1\nName: culina\nVersion: 0.1.0\nSummary: test\n\nlong description\n"
// as a raw deflate stream (zlib level 9, window bits -15), the way wheels store it.
const char kDeflatedMetadata[] =
    "\xf3\x4d\x2d\x49\x4c\x49\x2c\x49\xd4\x0d\x4b\x2d\x2a\xce\xcc\xcf\xb3\x52\x30\xd2\x33\xe4\xf2\x4b\xcc\x4d\xb5"
    "\x52\x48\x2e\xcd\xc9\xcc\x4b\xe4\x82\xcb\x18\xe8\x19\xea\x19\x70\x05\x97\xe6\xe6\x26\x16\x55\x5a\x29\x94\xa4"
    "\x16\x97\x70\x71\xe5\xe4\xe7\xa5\x2b\xa4\xa4\x16\x27\x17\x65\x16\x94\x00\x95\x71\x01\x00";
constexpr std::size_t kDeflatedMetadataSize = sizeof(kDeflatedMetadata) - 1;
constexpr std::size_t kMetadataSize = 82;

struct Entry {
    std::string name;
    std::string data;  // as stored (compressed for method 8)
    std::uint16_t method = 0;
    std::uint32_t uncompressed_size = 0;
};

// Little-endian fields: {value, width in bytes}.
void put(std::string& out, std::initializer_list<std::pair<std::uint64_t, int>> fields) {
    for (const auto& [value, width] : fields) {
        for (int i = 0; i < width; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
    }
}

// A minimal zip writer for the tests (CRCs are zero: the reader does not check them; the
// digest of the whole file is what protects the contents).
std::string make_zip(const std::vector<Entry>& entries) {
    std::string zip;
    std::string directory;
    for (const Entry& entry : entries) {
        const std::uint64_t size = entry.method == 0 ? entry.data.size() : entry.uncompressed_size;
        const std::uint64_t offset = zip.size();
        const std::uint64_t name_size = entry.name.size();
        put(zip, {{0x04034b50, 4}, {20, 2}, {0, 2}, {entry.method, 2}, {0, 4}, {0, 4}, {entry.data.size(), 4},
                  {size, 4}, {name_size, 2}, {0, 2}});
        zip += entry.name + entry.data;
        put(directory, {{0x02014b50, 4}, {20, 2}, {20, 2}, {0, 2}, {entry.method, 2}, {0, 4}, {0, 4},
                        {entry.data.size(), 4}, {size, 4}, {name_size, 2}, {0, 2}, {0, 2}, {0, 2}, {0, 2}, {0, 4},
                        {offset, 4}});
        directory += entry.name;
    }
    const std::uint64_t directory_offset = zip.size();
    zip += directory;
    put(zip, {{0x06054b50, 4}, {0, 2}, {0, 2}, {entries.size(), 2}, {entries.size(), 2}, {directory.size(), 4},
              {directory_offset, 4}, {0, 2}});
    return zip;
}

Entry stored_metadata(const std::string& name, const std::string& version, const std::string& dist_info = "culina-0.1.0") {
    return {dist_info + ".dist-info/METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n\nbody\n"};
}

Entry deflated_metadata() {
    return {"culina-0.1.0.dist-info/METADATA", std::string(kDeflatedMetadata, kDeflatedMetadataSize), 8, kMetadataSize};
}

std::string write_file(const std::string& name, const std::string& bytes) {
    const std::string path = testing::TempDir() + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

// wheel_metadata_problem on the file at `path`, open for the call.
std::optional<std::string> metadata_problem(const std::string& path, const std::string& project, const std::string& version) {
    const Descriptor wheel(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    EXPECT_GE(wheel.get(), 0) << path;
    return wheel_metadata_problem(wheel.get(), project, version);
}

TEST(WheelCheck, AcceptsStoredAndDeflatedMetadata) {
    const Entry payload{"culina/_C.so", std::string(1000, 'x')};
    EXPECT_EQ(metadata_problem(write_file("good_stored.whl", make_zip({payload, stored_metadata("culina", "0.1.0")})),
                                     "culina", "0.1.0"),
              std::nullopt);
    EXPECT_EQ(metadata_problem(write_file("good_deflated.whl", make_zip({payload, deflated_metadata()})), "culina",
                                     "0.1.0"),
              std::nullopt);
}

TEST(WheelCheck, ProjectNamesCompareNormalized) {
    const std::string path = write_file("normalized.whl", make_zip({stored_metadata("Culina_Kernels", "0.1.0", "culina_kernels-0.1.0")}));
    EXPECT_EQ(metadata_problem(path, "culina-kernels", "0.1.0"), std::nullopt);
}

TEST(WheelCheck, RejectsWrongName) {
    const std::string path = write_file("wrong_name.whl", make_zip({stored_metadata("notculina", "0.1.0")}));
    const auto problem = metadata_problem(path, "culina", "0.1.0");
    ASSERT_TRUE(problem.has_value());
    EXPECT_NE(problem->find("Name: 'notculina', expected 'culina'"), std::string::npos) << *problem;
}

TEST(WheelCheck, RejectsWrongVersion) {
    const std::string path = write_file("wrong_version.whl", make_zip({stored_metadata("culina", "0.2.0")}));
    const auto problem = metadata_problem(path, "culina", "0.1.0");
    ASSERT_TRUE(problem.has_value());
    EXPECT_NE(problem->find("Version: '0.2.0', expected '0.1.0'"), std::string::npos) << *problem;
}

TEST(WheelCheck, RejectsMissingOrDuplicateOrNestedMetadata) {
    const Entry nested{"culina/vendored-1.0.dist-info/METADATA", "Name: culina\nVersion: 0.1.0\n"};
    EXPECT_TRUE(metadata_problem(write_file("none.whl", make_zip({nested})), "culina", "0.1.0").has_value());
    const std::string two = make_zip({stored_metadata("culina", "0.1.0"), stored_metadata("culina", "0.1.0", "other-1.0")});
    const auto problem = metadata_problem(write_file("two.whl", two), "culina", "0.1.0");
    ASSERT_TRUE(problem.has_value());
    EXPECT_NE(problem->find("2 top-level"), std::string::npos) << *problem;
}

TEST(WheelCheck, RejectsNotAZip) {
    const auto problem = metadata_problem(write_file("text.whl", std::string(5000, 'a')), "culina", "0.1.0");
    ASSERT_TRUE(problem.has_value());
    EXPECT_NE(problem->find("not a readable zip"), std::string::npos) << *problem;
    EXPECT_TRUE(metadata_problem(write_file("tiny.whl", "PK"), "culina", "0.1.0").has_value());
}

TEST(WheelCheck, RejectsAnEndRecordHiddenInTheComment) {
    // The real end record's comment covers a second, later signature whose comment does not
    // reach the end: Python's zipfile (pip) would take the later one, so the reader refuses both.
    std::string zip = make_zip({stored_metadata("culina", "0.1.0")});
    ASSERT_EQ(metadata_problem(write_file("plain.whl", zip), "culina", "0.1.0"), std::nullopt);
    zip[zip.size() - 2] = 22;
    zip += std::string("PK\x05\x06", 4) + std::string(16, '\0') + std::string("\x05\x00", 2);
    const auto problem = metadata_problem(write_file("hidden.whl", zip), "culina", "0.1.0");
    ASSERT_TRUE(problem.has_value());
    EXPECT_NE(problem->find("does not reach the end of the file"), std::string::npos) << *problem;
}

TEST(WheelCheck, RejectsALocalHeaderNamingAnotherFile) {
    std::string zip = make_zip({stored_metadata("culina", "0.1.0")});
    zip[30] ^= 0x20;  // the first letter of the local header's name
    const auto problem = metadata_problem(write_file("renamed.whl", zip), "culina", "0.1.0");
    ASSERT_TRUE(problem.has_value());
    EXPECT_NE(problem->find("the local header names another file"), std::string::npos) << *problem;
}

TEST(WheelCheck, RejectsEveryTruncation) {
    const std::string zip = make_zip({Entry{"culina/_C.so", std::string(300, 'x')}, deflated_metadata()});
    ASSERT_EQ(metadata_problem(write_file("whole.whl", zip), "culina", "0.1.0"), std::nullopt);
    for (std::size_t length = 0; length < zip.size(); length += 7) {
        EXPECT_TRUE(metadata_problem(write_file("cut.whl", zip.substr(0, length)), "culina", "0.1.0").has_value())
            << "cut at " << length;
    }
}

TEST(WheelCheck, RejectsCorruptDeflateData) {
    Entry broken = deflated_metadata();
    broken.data[10] ^= 0x55;
    broken.data[11] ^= 0x55;
    const auto problem = metadata_problem(write_file("corrupt.whl", make_zip({broken})), "culina", "0.1.0");
    EXPECT_TRUE(problem.has_value());
}

TEST(ZipReader, ListsEntriesAndReadsThem) {
    const Descriptor file(::open(write_file("list.whl", make_zip({Entry{"a.txt", "hello"}, deflated_metadata()})).c_str(),
                                 O_RDONLY | O_CLOEXEC));
    const ZipReader zip(file.get());
    ASSERT_EQ(zip.entries().size(), 2u);
    EXPECT_EQ(zip.entries()[0].name, "a.txt");
    EXPECT_EQ(zip.read(zip.entries()[0], 100), "hello");
    EXPECT_EQ(zip.read(zip.entries()[1], 1000).size(), kMetadataSize);
    EXPECT_THROW(zip.read(zip.entries()[1], 10), ZipError);
}

TEST(Metadata, ParsesHeaderBlockOnly) {
    const MetadataFields fields =
        parse_metadata_fields("Metadata-Version: 2.1\r\nName:  culina \r\nVersion: 0.1.0\r\n\r\nName: body-is-not-a-header\n");
    EXPECT_EQ(fields.name, "culina");
    EXPECT_EQ(fields.version, "0.1.0");
    EXPECT_EQ(parse_metadata_fields("\nName: x\n").name, "");
}

// fetch_wheel without the network: the cache path, offline mode and the expectation checks.
class FetchWheel : public testing::Test {
protected:
    void SetUp() override {
        root_ = (std::filesystem::path(testing::TempDir()) / ("culina_fetch_wheel_" + std::to_string(::getpid())))
                    .lexically_normal()
                    .string();
        std::filesystem::remove_all(root_);
        std::filesystem::create_directories(root_ + "/wheels");
        zip_ = make_zip({Entry{"culina/_C.so", std::string(500, 'x')}, deflated_metadata()});
        expected_ = {"https://127.0.0.1:9/x.whl", "culina-0.1.0-py3-none-any.whl", sha256_hex(zip_), zip_.size(), "culina", "0.1.0"};
        options_.settings = default_helper_settings(SettingNames{}).fetch;
        options_.settings.cache_root = root_;
        options_.settings.offline = true;
        options_.log = [this](const std::string& line) { log_ += line + "\n"; };
    }
    void TearDown() override { std::filesystem::remove_all(root_); }

    std::string cached() const { return root_ + "/wheels/" + expected_.file; }

    std::string root_, zip_, log_;
    WheelExpectation expected_;
    FetchOptions options_;
};

TEST_F(FetchWheel, ServesAVerifiedCachedWheelWithoutNetwork) {
    std::ofstream(cached(), std::ios::binary) << zip_;
    const FetchedWheel fetched = fetch_wheel(expected_, options_);
    EXPECT_EQ(fetched.path, cached());
    EXPECT_FALSE(fetched.private_folder);
    EXPECT_NE(log_.find("using the cached"), std::string::npos) << log_;
}

TEST_F(FetchWheel, APlantedLinkAtTheWheelPathIsRemovedNotFollowed) {
    const std::string victim = root_ + "/victim.whl";
    std::ofstream(victim, std::ios::binary) << zip_;  // even a valid wheel: a link is never served
    std::filesystem::create_symlink(victim, cached());
    EXPECT_THROW(fetch_wheel(expected_, options_), FetchError);
    EXPECT_FALSE(std::filesystem::is_symlink(cached()));
    EXPECT_TRUE(std::filesystem::exists(victim)) << "the link's target is left alone";
    EXPECT_NE(log_.find("is not a file this cache wrote (it is a symbolic link"), std::string::npos) << log_;
}

TEST_F(FetchWheel, ALocalReleaseFolderServesOfflineAndIsOnlyRead) {
    const std::string mirror = root_ + "/mirror";
    std::filesystem::create_directories(mirror);
    std::ofstream(mirror + "/" + expected_.file, std::ios::binary) << zip_;
    ::chmod((mirror + "/" + expected_.file).c_str(), 0444);
    ::chmod(mirror.c_str(), 0555);
    const auto before = std::filesystem::last_write_time(mirror);
    expected_.url = "file://" + mirror + "/" + expected_.file;
    const FetchedWheel fetched = fetch_wheel(expected_, options_);
    EXPECT_EQ(fetched.path, cached());
    EXPECT_EQ(sha256_file_hex(fetched.path), expected_.sha256);
    EXPECT_EQ(std::filesystem::last_write_time(mirror), before);
    EXPECT_EQ(std::vector<std::string>{expected_.file}, [&] {
        std::vector<std::string> names;
        for (const auto& entry : std::filesystem::directory_iterator(mirror)) names.push_back(entry.path().filename());
        return names;
    }());
    ::chmod(mirror.c_str(), 0755);
}

TEST_F(FetchWheel, ACorruptedFileInALocalReleaseFolderIsRefused) {
    const std::string mirror = root_ + "/mirror";
    std::filesystem::create_directories(mirror);
    std::string damaged = zip_;
    damaged[40] ^= 0x01;
    std::ofstream(mirror + "/" + expected_.file, std::ios::binary) << damaged;
    expected_.url = mirror + "/" + expected_.file;
    try {
        fetch_wheel(expected_, options_);
        FAIL() << "a corrupted mirror file must be refused";
    } catch (const FetchError& error) {
        EXPECT_EQ(error.kind, FetchError::Kind::verification);
        EXPECT_NE(std::string(error.what()).find("has sha256"), std::string::npos) << error.what();
    }
    EXPECT_FALSE(std::filesystem::exists(cached()));
    EXPECT_FALSE(std::filesystem::exists(cached() + ".part"));
}

TEST_F(FetchWheel, ACacheOthersMayWriteIsNotUsed) {
    const std::string mirror = root_ + "/mirror";
    std::filesystem::create_directories(mirror);
    std::ofstream(mirror + "/" + expected_.file, std::ios::binary) << zip_;
    std::ofstream(cached(), std::ios::binary) << zip_;  // planted by whoever may write the folder
    ::chmod((root_ + "/wheels").c_str(), 0777);
    expected_.url = mirror + "/" + expected_.file;
    const FetchedWheel fetched = fetch_wheel(expected_, options_);
    EXPECT_TRUE(fetched.private_folder);
    EXPECT_NE(fetched.path, cached());
    EXPECT_EQ(fetched.path.rfind(root_, 0), std::string::npos) << fetched.path;
    EXPECT_NE(log_.find("WARNING: not using the wheel cache: " + root_ + "/wheels may be written by group or others"),
              std::string::npos)
        << log_;
    std::filesystem::remove_all(std::filesystem::path(fetched.path).parent_path().parent_path());
}

TEST_F(FetchWheel, DeletesADamagedCachedWheel) {
    std::string damaged = zip_;
    damaged[40] ^= 0x01;
    std::ofstream(cached(), std::ios::binary) << damaged;
    try {
        fetch_wheel(expected_, options_);
        FAIL() << "offline with a damaged cache entry must fail";
    } catch (const FetchError& error) {
        EXPECT_NE(std::string(error.what()).find("CULINA_OFFLINE=1"), std::string::npos) << error.what();
    }
    EXPECT_FALSE(std::filesystem::exists(cached()));
    EXPECT_NE(log_.find("fails verification (its sha256 is"), std::string::npos) << log_;
}

TEST_F(FetchWheel, CachedWheelOfAnotherVersionIsNotServed) {
    std::ofstream(cached(), std::ios::binary) << zip_;
    expected_.version = "0.2.0";
    EXPECT_THROW(fetch_wheel(expected_, options_), FetchError);
    EXPECT_FALSE(std::filesystem::exists(cached()));
}

TEST_F(FetchWheel, RejectsUnusableExpectationsBeforeTouchingDisk) {
    for (const char* file : {"../x.whl", "x.tar.gz", ".whl", ""}) {
        WheelExpectation bad = expected_;
        bad.file = file;
        EXPECT_THROW(fetch_wheel(bad, options_), FetchError) << file;
    }
    WheelExpectation bad_digest = expected_;
    bad_digest.sha256 = "abc";
    EXPECT_THROW(fetch_wheel(bad_digest, options_), FetchError);
    WheelExpectation empty = expected_;
    empty.size = 0;
    EXPECT_THROW(fetch_wheel(empty, options_), FetchError);
    EXPECT_TRUE(std::filesystem::is_empty(root_ + "/wheels"));
}

}  // namespace
}  // namespace culina::fetch
