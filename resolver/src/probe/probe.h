// The host probe: runs each detector and applies the user's overrides.
#pragma once

#include "host/host_info.h"
#include "probe/probe_settings.h"

namespace culina {

HostInfo probe_host(const ProbeSettings& settings);
// Settings from the environment; throws SettingError for a malformed value.
HostInfo probe_host();

}  // namespace culina
