// HostInfo as JSON (`probe --json`, and the host part of a decision record).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "host/host_info.h"

namespace culina {

nlohmann::json host_to_json(const HostInfo& host);

// The text of a JSON document that holds host data (`probe --json`, a decision record). The
// probe makes every text it takes in printable; should a byte that is not UTF-8 still get here,
// it becomes U+FFFD instead of an exception that would cost the install.
std::string host_json_text(const nlohmann::json& document);

}  // namespace culina
