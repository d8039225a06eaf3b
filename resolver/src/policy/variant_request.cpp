#include "policy/variant_request.h"

#include <cctype>

#include "common/setting_error.h"
#include "common/text.h"
#include "manifest/manifest.h"
#include "manifest/wheel_filename.h"

namespace culina {

bool VariantRequest::is_cpu() const { return kind == Kind::label && label == kCpuVariantLabel; }

std::string VariantRequest::str() const {
    switch (kind) {
        case Kind::automatic: return "auto";
        case Kind::source: return "source";
        case Kind::label: return label;
    }
    return "";
}

VariantRequest parse_variant_request(const std::optional<std::string>& value) {
    std::string text = trim(value.value_or(""));
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (text.empty() || text == "auto") return VariantRequest::automatic();
    if (text == "source") return VariantRequest::source_build();
    if (text == "cpu" || text == kCpuVariantLabel) return VariantRequest::of_label(kCpuVariantLabel);
    if (!is_valid_variant_label(text)) {
        throw SettingError(kVariantVariable, value.value_or(""),
                           "accepted: auto, source, null (alias cpu), or a release label such as cu129 or cu130 "
                           "(1-16 characters of a-z, 0-9, '.', '_')");
    }
    return VariantRequest::of_label(text);
}

}  // namespace culina
