#include <gtest/gtest.h>

#include <random>
#include <string>

#include "common/sha256.h"

namespace culina {
namespace {

struct Vector {
    std::string input;
    const char* digest;
};

// FIPS 180-4 / NIST CAVP examples; the 56- and 112-byte inputs end exactly where padding spills
// into another block.
std::vector<Vector> vectors() {
    return {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
        {std::string(1000000, 'a'), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
    };
}

TEST(Sha256, KnownVectorsPortable) {
    for (const Vector& vector : vectors()) {
        Sha256 hasher(Sha256::Engine::portable);
        hasher.update(vector.input.data(), vector.input.size());
        EXPECT_EQ(hasher.finish_hex(), vector.digest) << vector.input.size() << " bytes";
    }
}

TEST(Sha256, KnownVectorsBestEngine) {
    if (!sha256_hardware_available()) GTEST_SKIP() << "no SHA extensions on this CPU: the best engine is the portable one";
    for (const Vector& vector : vectors()) {
        EXPECT_EQ(sha256_hex(vector.input), vector.digest) << vector.input.size() << " bytes";
    }
}

TEST(Sha256, ChunkingDoesNotChangeTheDigest) {
    std::mt19937 random(7);
    std::string data(3000, '\0');
    for (char& c : data) c = static_cast<char>(random());
    for (std::size_t length : {0, 1, 55, 56, 63, 64, 65, 119, 120, 127, 128, 1000, 3000}) {
        const std::string input = data.substr(0, length);
        Sha256 whole(Sha256::Engine::portable);
        whole.update(input.data(), input.size());
        const std::string expected = whole.finish_hex();
        for (std::size_t step : {1, 3, 64, 100}) {
            for (Sha256::Engine engine : {Sha256::Engine::portable, Sha256::Engine::best}) {
                Sha256 pieces(engine);
                for (std::size_t at = 0; at < length; at += step) pieces.update(input.data() + at, std::min(step, length - at));
                EXPECT_EQ(pieces.finish_hex(), expected) << "length " << length << " step " << step;
            }
        }
    }
}

TEST(Sha256, ResetStartsOver) {
    Sha256 hasher;
    hasher.update("garbage", 7);
    hasher.reset();
    hasher.update("abc", 3);
    EXPECT_EQ(hasher.finish_hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, FileDigestAndUnreadableFile) {
    const std::string path = testing::TempDir() + "/culina_sha256_abc";
    FILE* file = std::fopen(path.c_str(), "wb");
    ASSERT_NE(file, nullptr);
    std::fputs("abc", file);
    std::fclose(file);
    EXPECT_EQ(sha256_file_hex(path), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    std::remove(path.c_str());
    EXPECT_THROW(sha256_file_hex(path), std::runtime_error);
}

}  // namespace
}  // namespace culina
