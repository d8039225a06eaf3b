// Raw deflate decoding for zip entries, with zlib opened at run time from libz.so.1 (the helper
// builds without zlib's headers). Only inflate is declared here; zlib's ABI for it is stable.
#pragma once

#include <cstdint>
#include <string>

namespace culina::fetch {

// Inflates a raw deflate stream (zip method 8) that must decode to exactly `expected_size`
// bytes. Throws std::runtime_error saying what went wrong (corrupt data, libz.so.1 missing).
std::string inflate_raw(const std::string& compressed, std::uint64_t expected_size);

}  // namespace culina::fetch
