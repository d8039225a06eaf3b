#include "policy/variant_request.h"

#include <cctype>

#include "common/text.h"
#include "facts/cuda_facts.h"
#include "manifest/wheel_filename.h"

namespace culina {

bool VariantRequest::is_cpu() const { return kind == Kind::label && label == cuda_facts().variant_label.cpu; }

std::string VariantRequest::str() const {
    switch (kind) {
        case Kind::automatic: return "auto";
        case Kind::source: return "source";
        case Kind::label: return label;
    }
    return "";
}

std::optional<VariantRequest> parse_variant_request(const std::string& value) {
    std::string text = trim(value);
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (text.empty() || text == "auto") return VariantRequest::automatic();
    if (text == "source") return VariantRequest::source_build();
    const VariantLabelFacts& labels = cuda_facts().variant_label;
    if (text == labels.cpu_alias || text == labels.cpu) return VariantRequest::of_label(labels.cpu);
    if (!is_valid_variant_label(text)) return std::nullopt;
    return VariantRequest::of_label(text);
}

}  // namespace culina
