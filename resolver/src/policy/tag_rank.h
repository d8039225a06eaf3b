// The interpreter's supported wheel tags, best first (packaging.tags order), and where a wheel
// ranks in them: a lower rank is a better fit.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "manifest/manifest.h"

namespace culina {

// A tags file: one tag per line, best first ("cp312-cp312-manylinux_2_28_x86_64"); blank
// lines are skipped. Throws PolicyInputError naming `source` and the line for a malformed tag
// or a file without tags.
std::vector<std::string> parse_supported_tags(const std::string& text, const std::string& source);

// Best (lowest) index in `supported` of any tag the wheel's compressed tags expand to;
// nullopt when the interpreter supports none of them.
std::optional<size_t> tag_rank(const WheelEntry& wheel, const std::vector<std::string>& supported);

}  // namespace culina
