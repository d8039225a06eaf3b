// HostInfo as a readable table (`probe` without --json).
#pragma once

#include <string>

#include "host/host_info.h"

namespace culina {

std::string host_to_table(const HostInfo& host);

}  // namespace culina
