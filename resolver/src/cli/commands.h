// One function per `culina-resolver` sub-command; each returns the process exit code. Those that
// read settings get them parsed (settings/helper_settings.h) before they run.
#pragma once

#include <string>
#include <vector>

#include "common/error.h"
#include "settings/helper_settings.h"

namespace culina::cli {

using Args = std::vector<std::string>;

int probe_command(const Args& args, const HelperSettings& settings);
int select_command(const Args& args, const HelperSettings& settings);
int fetch_command(const Args& args, const HelperSettings& settings);
int resolve_command(const Args& args, const HelperSettings& settings);
int mirror_command(const Args& args, const HelperSettings& settings);
int manifest_command(const Args& args);
int version_command(const Args& args, const SettingNames& names);  // the settings under names' prefix

}  // namespace culina::cli
