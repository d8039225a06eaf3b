// libFuzzer target for the wheel's zip reader and the METADATA check behind it: any bytes either
// list and read or raise ZipError (wheel_metadata_problem turns that into a message). Anything
// else (another exception, a crash, a sanitizer report, a huge allocation) is a bug.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "fetch/wheel_check.h"
#include "fetch/zip_reader.h"

namespace {

// The reader works on descriptors (a wheel can be larger than memory), so each input goes to an
// anonymous in-memory file: nothing is left behind when the fuzzer stops.
int input_file(const std::uint8_t* data, std::size_t size) {
    const int fd = ::memfd_create("culina-zip-fuzz", MFD_CLOEXEC);
    if (fd < 0) __builtin_trap();
    for (std::size_t done = 0; done < size;) {
        const ssize_t written = ::write(fd, data + done, size - done);
        if (written <= 0) __builtin_trap();
        done += static_cast<std::size_t>(written);
    }
    if (::lseek(fd, 0, SEEK_SET) != 0) __builtin_trap();
    return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const int fd = input_file(data, size);
    try {
        const culina::fetch::ZipReader zip(fd);
        for (const culina::fetch::ZipEntry& entry : zip.entries()) {
            try {
                zip.read(entry, 1 << 20);
            } catch (const culina::fetch::ZipError&) {
            }
        }
    } catch (const culina::fetch::ZipError&) {
    }
    culina::fetch::wheel_metadata_problem(fd, "culina", "0.1.0");
    ::close(fd);
    return 0;
}
