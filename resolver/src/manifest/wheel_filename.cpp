#include "manifest/wheel_filename.h"

#include <cctype>

#include "common/text.h"
#include "facts/cuda_facts.h"

namespace culina {
namespace {

bool is_tag_name(const std::string& part) {
    if (part.empty()) return false;
    for (char c : part) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
    }
    return true;
}

bool is_distribution_or_version(const std::string& part) {
    if (part.empty()) return false;
    for (char c : part) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '+') return false;
    }
    return true;
}

}  // namespace

bool is_valid_variant_label(const std::string& label) {
    const VariantLabelFacts& rule = cuda_facts().variant_label;
    return !label.empty() && label.size() <= rule.max_length && label.find_first_not_of(rule.characters) == std::string::npos;
}

std::optional<std::vector<std::string>> expand_compressed_tag(const std::string& tag) {
    const std::vector<std::string> parts = split(tag, '-');
    if (parts.size() != 3) return std::nullopt;
    std::vector<std::vector<std::string>> choices;
    for (const std::string& part : parts) {
        std::vector<std::string> names = split(lowercase(part), '.');
        for (const std::string& name : names) {
            if (!is_tag_name(name)) return std::nullopt;
        }
        choices.push_back(std::move(names));
    }
    std::vector<std::string> tags;
    for (const std::string& python : choices[0]) {
        for (const std::string& abi : choices[1]) {
            for (const std::string& platform : choices[2]) tags.push_back(python + "-" + abi + "-" + platform);
        }
    }
    return tags;
}

std::optional<WheelFileName> parse_wheel_filename(const std::string& file) {
    const std::string suffix = ".whl";
    if (file.size() <= suffix.size() || !ends_with(file, suffix)) {
        return std::nullopt;
    }
    const std::vector<std::string> parts = split(file.substr(0, file.size() - suffix.size()), '-');
    if (parts.size() != 6 && parts.size() != 7) return std::nullopt;
    WheelFileName name;
    name.distribution = parts[0];
    name.version = parts[1];
    size_t next = 2;
    if (parts.size() == 7) {
        name.build = parts[next++];
        if (name.build.empty() || !std::isdigit(static_cast<unsigned char>(name.build[0])) ||
            !is_distribution_or_version(name.build)) {
            return std::nullopt;
        }
    }
    name.compressed_tag = parts[next] + "-" + parts[next + 1] + "-" + parts[next + 2];
    name.variant = parts[next + 3];
    if (!is_distribution_or_version(name.distribution) || !is_distribution_or_version(name.version) ||
        !expand_compressed_tag(name.compressed_tag) || !is_valid_variant_label(name.variant)) {
        return std::nullopt;
    }
    return name;
}

}  // namespace culina
