// One function per `culina-resolver` sub-command; each returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace culina::cli {

using Args = std::vector<std::string>;

int probe_command(const Args& args);
int select_command(const Args& args);
int fetch_command(const Args& args);
int resolve_command(const Args& args);
int manifest_command(const Args& args);
int mirror_command(const Args& args);
int version_command(const Args& args);

}  // namespace culina::cli
