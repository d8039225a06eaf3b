#include "fetch/zip_reader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fetch/zlib_library.h"

namespace culina::fetch {
namespace {

constexpr std::uint32_t kEndOfCentralDirectory = 0x06054b50;
constexpr std::uint32_t kZip64EndLocator = 0x07064b50;
constexpr std::uint32_t kZip64End = 0x06064b50;
constexpr std::uint32_t kCentralHeader = 0x02014b50;
constexpr std::uint32_t kLocalHeader = 0x04034b50;
constexpr std::size_t kEndRecordSize = 22;
constexpr std::size_t kMaxCommentSize = 0xFFFF;
constexpr std::size_t kLocalHeaderSize = 30;
constexpr std::uint16_t kZip64ExtraTag = 0x0001;

// Little-endian fields out of a byte string, bounds-checked.
class Fields {
public:
    Fields(const std::string& bytes, std::size_t offset = 0) : bytes_(bytes), offset_(offset) {}
    std::uint64_t take(int width) {
        if (offset_ + width > bytes_.size()) throw ZipError("a record runs past its end");
        std::uint64_t value = 0;
        for (int i = width - 1; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes_[offset_ + i]);
        offset_ += width;
        return value;
    }
    std::uint16_t u16() { return static_cast<std::uint16_t>(take(2)); }
    std::uint32_t u32() { return static_cast<std::uint32_t>(take(4)); }
    std::uint64_t u64() { return take(8); }
    void skip(std::size_t count) { offset_ += count; }
    std::size_t offset() const { return offset_; }

private:
    const std::string& bytes_;
    std::size_t offset_;
};

struct Directory {
    std::uint64_t entries = 0;
    std::uint64_t size = 0;
    std::uint64_t offset = 0;
};

// Sizes and offset that do not fit 32 bits are 0xFFFFFFFF in the header and live in the zip64
// extra field, in this order, only for the fields that overflowed.
void apply_zip64_extra(const std::string& extra, ZipEntry& entry) {
    Fields fields(extra);
    while (fields.offset() + 4 <= extra.size()) {
        const std::uint16_t tag = fields.u16();
        const std::uint16_t length = fields.u16();
        if (tag != kZip64ExtraTag) {
            fields.skip(length);
            continue;
        }
        Fields data(extra, fields.offset());
        if (entry.uncompressed_size == 0xFFFFFFFF) entry.uncompressed_size = data.u64();
        if (entry.compressed_size == 0xFFFFFFFF) entry.compressed_size = data.u64();
        if (entry.local_header_offset == 0xFFFFFFFF) entry.local_header_offset = data.u64();
        return;
    }
}

}  // namespace

ZipReader::ZipReader(int fd) : fd_(fd) {
    struct stat info {};
    if (::fstat(fd_, &info) != 0) throw ZipError("cannot stat: " + std::string(std::strerror(errno)));
    file_size_ = static_cast<std::uint64_t>(info.st_size);
    read_central_directory();
}

std::string ZipReader::read_at(std::uint64_t offset, std::uint64_t length) const {
    if (offset > file_size_ || length > file_size_ - offset) {
        throw ZipError("a record points past the end of the file (truncated?)");
    }
    std::string bytes(length, '\0');
    std::uint64_t done = 0;
    while (done < length) {
        const ssize_t got = ::pread(fd_, bytes.data() + done, length - done, static_cast<off_t>(offset + done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) throw ZipError("cannot read: " + std::string(got < 0 ? std::strerror(errno) : "unexpected end"));
        done += static_cast<std::uint64_t>(got);
    }
    return bytes;
}

void ZipReader::read_central_directory() {
    if (file_size_ < kEndRecordSize) throw ZipError("too short to be a zip file");
    const std::uint64_t tail_size = std::min<std::uint64_t>(file_size_, kEndRecordSize + kMaxCommentSize);
    const std::uint64_t tail_offset = file_size_ - tail_size;
    const std::string tail = read_at(tail_offset, tail_size);

    // The end record is the last signature, as Python's zipfile (pip) takes it, and its comment
    // must reach exactly to the end: a signature hidden in a comment could otherwise show this
    // reader one directory and pip another.
    std::size_t end_at = std::string::npos;
    for (std::size_t at = tail.size() - kEndRecordSize + 1; at-- > 0;) {
        Fields probe(tail, at);
        if (probe.u32() != kEndOfCentralDirectory) continue;
        probe.skip(16);
        if (at + kEndRecordSize + probe.u16() != tail.size()) {
            throw ZipError("the last end of central directory record does not reach the end of the file "
                           "(a record hidden in a comment, or trailing bytes)");
        }
        end_at = at;
        break;
    }
    if (end_at == std::string::npos) throw ZipError("no end of central directory record (not a zip file, or truncated)");

    Fields end(tail, end_at + 4);
    const std::uint16_t this_disk = end.u16();
    const std::uint16_t directory_disk = end.u16();
    end.u16();
    Directory directory;
    directory.entries = end.u16();
    directory.size = end.u32();
    directory.offset = end.u32();
    if (this_disk != 0 || directory_disk != 0) throw ZipError("split across several disks");

    if (directory.entries == 0xFFFF || directory.size == 0xFFFFFFFF || directory.offset == 0xFFFFFFFF) {
        if (end_at < 20) throw ZipError("zip64 end locator missing");
        Fields locator(tail, end_at - 20);
        if (locator.u32() != kZip64EndLocator) throw ZipError("zip64 end locator missing");
        locator.u32();
        const std::uint64_t zip64_end_offset = locator.u64();
        const std::string record = read_at(zip64_end_offset, 56);
        Fields zip64(record);
        if (zip64.u32() != kZip64End) throw ZipError("zip64 end record missing");
        zip64.skip(8 + 2 + 2 + 4 + 4 + 8);
        directory.entries = zip64.u64();
        directory.size = zip64.u64();
        directory.offset = zip64.u64();
    }

    const std::string listing = read_at(directory.offset, directory.size);
    Fields fields(listing);
    for (std::uint64_t index = 0; index < directory.entries; ++index) {
        if (fields.u32() != kCentralHeader) throw ZipError("central directory entry " + std::to_string(index) + " is damaged");
        fields.skip(6);
        ZipEntry entry;
        entry.method = fields.u16();
        fields.skip(8);
        entry.compressed_size = fields.u32();
        entry.uncompressed_size = fields.u32();
        const std::uint16_t name_length = fields.u16();
        const std::uint16_t extra_length = fields.u16();
        const std::uint16_t comment_length = fields.u16();
        fields.skip(8);
        entry.local_header_offset = fields.u32();
        const std::size_t name_at = fields.offset();
        if (name_at + name_length + extra_length + comment_length > listing.size()) {
            throw ZipError("central directory entry " + std::to_string(index) + " runs past the directory");
        }
        entry.name = listing.substr(name_at, name_length);
        apply_zip64_extra(listing.substr(name_at + name_length, extra_length), entry);
        fields.skip(name_length + extra_length + comment_length);
        entries_.push_back(std::move(entry));
    }
}

std::string ZipReader::read(const ZipEntry& entry, std::uint64_t size_limit) const {
    if (entry.uncompressed_size > size_limit || entry.compressed_size > size_limit) {
        throw ZipError(entry.name + " is larger than " + std::to_string(size_limit) + " bytes");
    }
    const std::string header = read_at(entry.local_header_offset, kLocalHeaderSize);
    Fields fields(header);
    if (fields.u32() != kLocalHeader) throw ZipError(entry.name + ": local header is damaged");
    fields.skip(22);
    const std::uint16_t name_length = fields.u16();
    const std::uint16_t extra_length = fields.u16();
    // Python's zipfile refuses a local name that differs from the directory's; so does this reader.
    if (read_at(entry.local_header_offset + kLocalHeaderSize, name_length) != entry.name) {
        throw ZipError(entry.name + ": the local header names another file");
    }
    const std::string data =
        read_at(entry.local_header_offset + kLocalHeaderSize + name_length + extra_length, entry.compressed_size);
    if (entry.method == 0) {
        if (entry.compressed_size != entry.uncompressed_size) throw ZipError(entry.name + ": stored sizes disagree");
        return data;
    }
    if (entry.method == 8) {
        try {
            return inflate_raw(data, entry.uncompressed_size);
        } catch (const std::runtime_error& error) {
            throw ZipError(entry.name + ": " + error.what());
        }
    }
    throw ZipError(entry.name + " uses compression method " + std::to_string(entry.method) +
                   " (wheels use stored or deflate)");
}

}  // namespace culina::fetch
