// SHA-256 (FIPS 180-4), streaming. Our own implementation: the helper may depend on nothing
// but a C++17 compiler, and a fetched wheel is only trusted once its digest matches the manifest.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace culina {

class Sha256 {
public:
    // `portable` forces the plain C++ rounds even where the CPU has SHA instructions;
    // the tests use it to check both paths against the same vectors.
    enum class Engine { best, portable };

    explicit Sha256(Engine engine = Engine::best);

    void update(const void* data, std::size_t size);
    // Digest as 64 lowercase hex digits. The object must not be updated afterwards.
    std::string finish_hex();
    // Back to the empty-input state (same engine).
    void reset();

private:
    void compress(const std::uint8_t* blocks, std::size_t count);

    std::array<std::uint32_t, 8> state_{};
    std::array<std::uint8_t, 64> buffer_{};
    std::size_t buffered_ = 0;
    std::uint64_t total_bytes_ = 0;
    bool hardware_ = false;
};

// True when this CPU has the x86 SHA extensions (and SSE4.1) that the fast path uses.
bool sha256_hardware_available();

std::string sha256_hex(const std::string& data);

// Digest of a whole file; throws std::runtime_error naming the path when it cannot be read.
std::string sha256_file_hex(const std::string& path);

// Digest of everything in the open file `fd`, read from its start with pread (the descriptor's
// offset is left alone); throws std::runtime_error when it cannot be read.
std::string sha256_descriptor_hex(int fd);

}  // namespace culina
