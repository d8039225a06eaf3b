#include "fetch/zlib_library.h"

#include <dlfcn.h>

#include <stdexcept>

namespace culina::fetch {
namespace {

// z_stream as zlib 1.2.x and later lay it out.
struct ZStream {
    const unsigned char* next_in;
    unsigned avail_in;
    unsigned long total_in;
    unsigned char* next_out;
    unsigned avail_out;
    unsigned long total_out;
    const char* msg;
    void* state;
    void* zalloc;
    void* zfree;
    void* opaque;
    int data_type;
    unsigned long adler;
    unsigned long reserved;
};

constexpr int kZOk = 0;
constexpr int kZStreamEnd = 1;
constexpr int kZFinish = 4;
constexpr int kRawDeflateWindowBits = -15;  // negative: no zlib header, as in zip entries

struct Zlib {
    int (*inflate_init2)(ZStream*, int window_bits, const char* version, int stream_size);
    int (*inflate)(ZStream*, int flush);
    int (*inflate_end)(ZStream*);
};

const Zlib& zlib() {
    static const Zlib loaded = [] {
        void* module = ::dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
        if (module == nullptr) {
            throw std::runtime_error("cannot load libz.so.1 to read the wheel's compressed METADATA: install zlib "
                                     "(Debian/Ubuntu: zlib1g, RHEL: zlib)");
        }
        Zlib functions{};
        functions.inflate_init2 = reinterpret_cast<decltype(functions.inflate_init2)>(::dlsym(module, "inflateInit2_"));
        functions.inflate = reinterpret_cast<decltype(functions.inflate)>(::dlsym(module, "inflate"));
        functions.inflate_end = reinterpret_cast<decltype(functions.inflate_end)>(::dlsym(module, "inflateEnd"));
        if (!functions.inflate_init2 || !functions.inflate || !functions.inflate_end) {
            throw std::runtime_error("libz.so.1 lacks inflateInit2_/inflate/inflateEnd: reinstall zlib");
        }
        return functions;
    }();
    return loaded;
}

}  // namespace

std::string inflate_raw(const std::string& compressed, std::uint64_t expected_size) {
    const Zlib& z = zlib();
    ZStream stream{};
    // zlib only compares the major digit of the version it is given.
    if (z.inflate_init2(&stream, kRawDeflateWindowBits, "1.2.11", sizeof(ZStream)) != kZOk) {
        throw std::runtime_error("zlib refused to start inflating (inflateInit2_ failed)");
    }
    std::string output(expected_size, '\0');
    stream.next_in = reinterpret_cast<const unsigned char*>(compressed.data());
    stream.avail_in = static_cast<unsigned>(compressed.size());
    stream.next_out = reinterpret_cast<unsigned char*>(output.data());
    // One spare byte: a stream that decodes to more than expected is caught, not cut.
    std::string spare(1, '\0');
    stream.avail_out = static_cast<unsigned>(expected_size);
    int result = z.inflate(&stream, kZFinish);
    if (result != kZStreamEnd && stream.avail_out == 0) {
        stream.next_out = reinterpret_cast<unsigned char*>(spare.data());
        stream.avail_out = 1;
        result = z.inflate(&stream, kZFinish);
    }
    const unsigned long produced = stream.total_out;
    const std::string message = stream.msg != nullptr ? stream.msg : "";
    z.inflate_end(&stream);
    if (result != kZStreamEnd || produced != expected_size) {
        throw std::runtime_error("corrupt deflate data (" + (message.empty() ? "decoded " + std::to_string(produced) +
                                                                                   " bytes, expected " +
                                                                                   std::to_string(expected_size)
                                                                             : message) +
                                 ")");
    }
    return output;
}

}  // namespace culina::fetch
