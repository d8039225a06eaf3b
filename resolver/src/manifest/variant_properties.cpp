#include "manifest/variant_properties.h"

#include <cctype>

namespace culina {
namespace {

bool is_identifier(const std::string& text) {
    if (text.empty()) return false;
    for (char c : text) {
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
}

bool is_value(const std::string& text) {
    if (text.empty()) return false;
    for (char c : text) {
        if (std::isspace(static_cast<unsigned char>(c)) || !std::isprint(static_cast<unsigned char>(c))) return false;
    }
    return true;
}

}  // namespace

std::optional<VariantProperty> parse_variant_property(const std::string& text) {
    const std::string separator = " :: ";
    const size_t first = text.find(separator);
    if (first == std::string::npos) return std::nullopt;
    const size_t second = text.find(separator, first + separator.size());
    if (second == std::string::npos) return std::nullopt;
    VariantProperty property{text.substr(0, first), text.substr(first + separator.size(), second - first - separator.size()),
                             text.substr(second + separator.size())};
    if (!is_identifier(property.name_space) || !is_identifier(property.feature) || !is_value(property.value)) {
        return std::nullopt;
    }
    return property;
}

std::vector<std::string> expected_nvidia_properties(const std::optional<CudaVersion>& cuda,
                                                    const std::vector<CudaArch>& archs) {
    std::vector<std::string> properties;
    if (!cuda) return properties;
    properties.push_back(VariantProperty{kNvidiaPropertyNamespace, "cuda_version_lower_bound", cuda->str()}.str());
    for (const CudaArch& arch : archs) {
        const char* kind = arch.kind == CudaArch::Kind::sass ? "_real" : "_virtual";
        properties.push_back(VariantProperty{kNvidiaPropertyNamespace, "sm_arch", arch.compact() + kind}.str());
    }
    return properties;
}

}  // namespace culina
