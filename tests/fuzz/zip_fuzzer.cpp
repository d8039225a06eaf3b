// libFuzzer target for the wheel's zip reader and the METADATA check behind it: any bytes either
// list and read or raise ZipError (wheel_metadata_problem turns that into a message). Anything
// else (another exception, a crash, a sanitizer report, a huge allocation) is a bug.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "fetch/wheel_check.h"
#include "fetch/zip_reader.h"

namespace {

// The reader works on files (a wheel can be larger than memory), so each input goes to one.
const std::string& input_path() {
    static const std::string path = "/tmp/culina-zip-fuzz-" + std::to_string(::getpid()) + ".zip";
    return path;
}

void write_input(const std::uint8_t* data, std::size_t size) {
    const int fd = ::open(input_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) __builtin_trap();
    for (std::size_t done = 0; done < size;) {
        const ssize_t written = ::write(fd, data + done, size - done);
        if (written <= 0) __builtin_trap();
        done += static_cast<std::size_t>(written);
    }
    ::close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    write_input(data, size);
    const int fd = ::open(input_path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) __builtin_trap();
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
