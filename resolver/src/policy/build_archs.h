// Architecture lists for a local build, as CMake/torch spell them: "7.5;8.0;9.0;10.0;12.0+PTX".
#pragma once

#include <string>
#include <vector>

#include "common/cuda_version.h"

namespace culina {

// Used when no GPU is visible and no --default-archs is given: the command line alone. Installs
// pass pyproject's list for the newest CUDA major ([tool.culina.release_archs] owns the lists);
// this one is what every CUDA 12 and 13 toolkit can build.
inline constexpr const char* kDefaultLocalBuildArchs = "7.5;8.0;9.0;10.0;12.0+PTX";

// "7.5;8.0;12.0+PTX" (also "75,80", "9.0a 12.0f") -> {"7.5", "8.0", "12.0+PTX"} in dotted form: the
// syntax adapter_settings.arch_list reads too, checked by the shared tests/data/arch_list_cases.json.
// Throws PolicyInputError naming `source`, the item and the accepted form.
std::vector<std::string> parse_arch_list(const std::string& text, const std::string& source);

// The items of `archs` a CUDA `toolkit` can build; each one it cannot is appended to `dropped`
// with the reason. When the item carrying "+PTX" is dropped, the newest kept item takes it, so
// the build still embeds PTX for GPUs newer than the list.
std::vector<std::string> archs_buildable_by(const std::vector<std::string>& archs, const CudaVersion& toolkit,
                                            std::vector<std::string>& dropped);

}  // namespace culina
