#include "policy/tag_rank.h"

#include "common/text.h"
#include "manifest/wheel_filename.h"
#include "policy/input_error.h"

namespace culina {

std::vector<std::string> parse_supported_tags(const std::string& text, const std::string& source) {
    std::vector<std::string> tags;
    const std::vector<std::string> lines = split(text, '\n');
    for (size_t i = 0; i < lines.size(); ++i) {
        const std::string line = trim(lines[i]);
        if (line.empty()) continue;
        const std::optional<std::vector<std::string>> expanded = expand_compressed_tag(line);
        if (!expanded || expanded->size() != 1) {
            throw PolicyInputError("tags file " + source + ", line " + std::to_string(i + 1) + ": '" + line +
                                   "' is not one wheel tag like cp312-cp312-manylinux_2_28_x86_64");
        }
        tags.push_back(expanded->front());
    }
    if (tags.empty()) {
        throw PolicyInputError("tags file " + source + " lists no tags; expected one tag per line, best first "
                               "(as packaging.tags.sys_tags() yields them)");
    }
    return tags;
}

std::optional<size_t> tag_rank(const WheelEntry& wheel, const std::vector<std::string>& supported) {
    std::optional<size_t> best;
    for (const std::string& compressed : wheel.tags) {
        const std::optional<std::vector<std::string>> expanded = expand_compressed_tag(compressed);
        if (!expanded) continue;
        for (const std::string& tag : *expanded) {
            for (size_t rank = 0; rank < supported.size() && (!best || rank < *best); ++rank) {
                if (supported[rank] == tag) best = rank;
            }
        }
    }
    return best;
}

}  // namespace culina
