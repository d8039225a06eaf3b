// Just enough of the zip format to list a wheel's entries and read one: the end of central
// directory record (zip64 included), the central directory, local headers; stored and deflated
// entries. Every offset and length is checked against the file, so a truncated or hostile file
// gives a ZipError, never a read out of bounds.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace culina::fetch {

struct ZipError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct ZipEntry {
    std::string name;
    std::uint16_t method = 0;  // 0 stored, 8 deflate
    std::uint64_t compressed_size = 0;
    std::uint64_t uncompressed_size = 0;
    std::uint64_t local_header_offset = 0;
};

class ZipReader {
public:
    // Reads the open file `fd` (with pread), which the caller keeps open while the reader lives:
    // the file that was checked is the file that is read. Throws ZipError.
    explicit ZipReader(int fd);
    ZipReader(const ZipReader&) = delete;
    ZipReader& operator=(const ZipReader&) = delete;

    const std::vector<ZipEntry>& entries() const { return entries_; }
    // The entry's bytes; throws ZipError when it is larger than `size_limit` or cannot be read.
    std::string read(const ZipEntry& entry, std::uint64_t size_limit) const;

private:
    std::string read_at(std::uint64_t offset, std::uint64_t length) const;
    void read_central_directory();

    int fd_ = -1;
    std::uint64_t file_size_ = 0;
    std::vector<ZipEntry> entries_;
};

}  // namespace culina::fetch
