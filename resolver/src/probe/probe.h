// The host probe: runs each detector and applies the user's overrides.
#pragma once

#include "host/host_info.h"
#include "probe/probe_settings.h"

namespace culina {

HostInfo probe_host(const ProbeSettings& settings);

}  // namespace culina
