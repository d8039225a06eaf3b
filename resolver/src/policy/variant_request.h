// The VARIANT setting (<PREFIX>VARIANT): which release variant the user asks for.
#pragma once

#include <optional>
#include <string>

namespace culina {

struct VariantRequest {
    enum class Kind {
        automatic,  // "auto" or unset: the policy decides
        label,      // a release label such as "cu130"; "null" (alias "cpu") is the CPU-only variant
        source,     // never install a prebuilt wheel; build locally
    };

    Kind kind = Kind::automatic;
    std::string label;  // set for Kind::label

    static VariantRequest automatic() { return {}; }
    static VariantRequest of_label(std::string label) { return {Kind::label, std::move(label)}; }
    static VariantRequest source_build() { return {Kind::source, ""}; }

    bool is_cpu() const;
    // As the user would write it back: "auto", "cu130", "null", "source".
    std::string str() const;
};

// Empty -> auto. Case and surrounding blanks are ignored; "cpu" reads as "null". nullopt for
// anything that cannot be a label (the settings table names the variable and the accepted
// form). Whether the release has the label is the policy's check.
std::optional<VariantRequest> parse_variant_request(const std::string& value);

}  // namespace culina
