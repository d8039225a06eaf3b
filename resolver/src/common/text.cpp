#include "common/text.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace culina {

std::string trim(const std::string& text) {
    const char* space = " \t\r\n\f\v";
    const size_t begin = text.find_first_not_of(space);
    if (begin == std::string::npos) return "";
    const size_t end = text.find_last_not_of(space);
    return text.substr(begin, end - begin + 1);
}

std::vector<std::string> split(const std::string& text, char separator) {
    std::vector<std::string> parts;
    std::string current;
    for (char c : text) {
        if (c == separator) {
            parts.push_back(current);
            current.clear();
        } else {
            current.push_back(c);
        }
    }
    parts.push_back(current);
    return parts;
}

std::vector<std::string> comma_list(const std::string& text) {
    std::vector<std::string> items;
    for (const std::string& item : split(text, ',')) {
        if (!trim(item).empty()) items.push_back(trim(item));
    }
    return items;
}

bool starts_with(const std::string& text, const std::string& prefix) {
    return text.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(const std::string& text, const std::string& suffix) {
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string lowercase(std::string text) {
    for (char& c : text) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return text;
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
    std::string joined;
    for (size_t i = 0; i < items.size(); ++i) joined += (i == 0 ? "" : separator) + items[i];
    return joined;
}

namespace {

bool is_continuation(unsigned char byte) { return (byte & 0xc0) == 0x80; }

// The length of the well-formed UTF-8 sequence at text[at] (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF), or 0 when the bytes there are not one.
std::size_t utf8_sequence_length(const std::string& text, std::size_t at) {
    const auto byte = [&text](std::size_t i) { return i < text.size() ? static_cast<unsigned char>(text[i]) : 0; };
    const unsigned char lead = byte(at);
    if (lead < 0x80) return 1;
    std::size_t length = 0;
    unsigned char second_low = 0x80;
    unsigned char second_high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) {
        length = 2;
    } else if (lead >= 0xe0 && lead <= 0xef) {
        length = 3;
        if (lead == 0xe0) second_low = 0xa0;
        if (lead == 0xed) second_high = 0x9f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        length = 4;
        if (lead == 0xf0) second_low = 0x90;
        if (lead == 0xf4) second_high = 0x8f;
    } else {
        return 0;
    }
    if (byte(at + 1) < second_low || byte(at + 1) > second_high) return 0;
    for (std::size_t i = 2; i < length; ++i) {
        if (!is_continuation(byte(at + i))) return 0;
    }
    return length;
}

// C0, DEL, C1 (U+0080..U+009F), the line and paragraph separators and the bidirectional
// controls (U+200E, U+200F, U+202A..U+202E, U+2066..U+2069), given as a well-formed sequence.
bool must_escape(const std::string& sequence) {
    const auto byte = [&sequence](std::size_t i) { return static_cast<unsigned char>(sequence[i]); };
    if (sequence.size() == 1) return byte(0) < 0x20 || byte(0) == 0x7f;
    if (sequence.size() == 2) return byte(0) == 0xc2 && byte(1) < 0xa0;
    if (sequence.size() != 3 || byte(0) != 0xe2) return false;
    const unsigned code = (byte(1) & 0x3fu) << 6 | (byte(2) & 0x3fu);  // U+2000 + code
    return code == 0x0e || code == 0x0f || (code >= 0x28 && code <= 0x2e) || (code >= 0x66 && code <= 0x69);
}

std::string escaped_bytes(const std::string& sequence) {
    static const char* const kHex = "0123456789abcdef";
    std::string shown;
    for (const char c : sequence) {
        const auto byte = static_cast<unsigned char>(c);
        shown += "\\x";
        shown.push_back(kHex[byte >> 4]);
        shown.push_back(kHex[byte & 15]);
    }
    return shown;
}

}  // namespace

std::string printable(const std::string& text, std::size_t limit) {
    static const std::string kReplacement = "\xef\xbf\xbd";  // U+FFFD
    std::string shown;
    std::size_t at = 0;
    while (at < text.size()) {
        const std::size_t length = utf8_sequence_length(text, at);
        const std::string sequence = text.substr(at, length == 0 ? 1 : length);
        const std::string piece = length == 0 ? kReplacement : must_escape(sequence) ? escaped_bytes(sequence) : sequence;
        // Whole pieces only: a cut never splits a character or an escape.
        if (shown.size() + piece.size() > limit) return shown + kCutMarker;
        shown += piece;
        at += sequence.size();
    }
    return shown;
}

std::optional<int> parse_small_uint(const std::string& text) {
    if (text.empty() || text.size() > 9) return std::nullopt;
    int value = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        value = value * 10 + (c - '0');
    }
    return value;
}

std::optional<std::string> read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

std::optional<std::string> get_env(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
}

std::string normalize_distribution_name(const std::string& name) {
    std::string normalized;
    bool in_separator_run = false;
    for (char c : name) {
        if (c == '-' || c == '_' || c == '.') {
            if (!in_separator_run) normalized.push_back('_');
            in_separator_run = true;
        } else {
            normalized.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
            in_separator_run = false;
        }
    }
    return normalized;
}

}  // namespace culina
