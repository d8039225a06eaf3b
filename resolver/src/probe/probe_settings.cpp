#include "probe/probe_settings.h"

#include <cmath>
#include <cstdlib>

#include "common/setting_error.h"
#include "common/text.h"

namespace culina {

std::optional<CudaVersion> parse_override_cuda(const std::string& value) {
    if (trim(value).empty()) return std::nullopt;
    if (std::optional<CudaVersion> version = parse_cuda_version(value)) return version;
    throw SettingError("CULINA_OVERRIDE_CUDA", value,
                       "expected the driver's CUDA version like '12.9' or '13.0' (empty: no driver)");
}

std::vector<ComputeCapability> parse_override_sm(const std::string& value) {
    std::vector<ComputeCapability> gpus;
    if (trim(value).empty()) return gpus;
    std::string normalised = value;
    for (char& c : normalised) {
        if (c == ';') c = ',';
    }
    for (const std::string& item : split(normalised, ',')) {
        const std::optional<ComputeCapability> sm = parse_compute_capability(item);
        if (!sm) {
            throw SettingError("CULINA_OVERRIDE_SM", value,
                               "expected compute capabilities separated by commas, like '8.6,9.0' or '86,90' "
                               "(empty: no GPU); '" + trim(item) + "' is not one");
        }
        gpus.push_back(*sm);
    }
    return gpus;
}

std::chrono::milliseconds parse_probe_timeout(const std::string& value) {
    const std::string text = trim(value);
    char* end = nullptr;
    const double seconds = text.empty() ? NAN : std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !(seconds > 0) || seconds > 3600) {
        throw SettingError("CULINA_PROBE_TIMEOUT", value, "expected seconds between 0 and 3600, like '15' or '0.5'");
    }
    return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

ProbeSettings probe_settings_from_env() {
    ProbeSettings settings;
    if (const std::optional<std::string> cuda = get_env("CULINA_OVERRIDE_CUDA")) {
        settings.override_cuda = parse_override_cuda(*cuda);
    }
    if (const std::optional<std::string> sm = get_env("CULINA_OVERRIDE_SM")) {
        settings.override_gpus = parse_override_sm(*sm);
    }
    if (const std::optional<std::string> timeout = get_env("CULINA_PROBE_TIMEOUT")) {
        settings.cuda_timeout = parse_probe_timeout(*timeout);
    }
    return settings;
}

}  // namespace culina
