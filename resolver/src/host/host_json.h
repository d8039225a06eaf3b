// HostInfo as JSON (`probe --json`, and the host part of a decision record).
#pragma once

#include <nlohmann/json.hpp>

#include "host/host_info.h"

namespace culina {

nlohmann::json host_to_json(const HostInfo& host);

}  // namespace culina
