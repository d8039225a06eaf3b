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

std::string printable(const std::string& text) {
    static const char* const kHex = "0123456789abcdef";
    std::string shown;
    shown.reserve(text.size());
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte >= 0x20 && byte < 0x7f) {
            shown.push_back(c);
        } else {
            shown += "\\x";
            shown.push_back(kHex[byte >> 4]);
            shown.push_back(kHex[byte & 15]);
        }
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
