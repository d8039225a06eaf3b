#include "cli/fetch_setup.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "common/text.h"
#include "fetch/release_location.h"

namespace culina::cli {

fetch::FetchOptions fetch_options_for(const std::string& command, const std::optional<std::string>& cache_dir,
                                      bool allow_http) {
    fetch::FetchOptions options;
    options.settings = fetch::fetch_settings_from_environment();
    if (cache_dir) {
        // A path on the command line is relative to where the command runs, as for any tool.
        const std::string flag_value =
            starts_with(*cache_dir, "~") ? *cache_dir : std::filesystem::absolute(*cache_dir).string();
        options.settings.cache_root = fetch::resolve_cache_root([&](const char* name) -> std::optional<std::string> {
            if (std::string(name) == "CULINA_CACHE_DIR") return flag_value;
            if (std::string(name) == "HOME") return get_env("HOME");
            return std::nullopt;
        });
    }
    options.allow_http = allow_http;
    const std::string prefix = "culina-resolver " + command + ": ";
    options.log = [prefix](const std::string& message) { std::cerr << prefix << message << "\n"; };
    options.progress_out = &std::cerr;
    options.progress_redraw = ::isatty(STDERR_FILENO) == 1;
    for (const std::string& note : options.settings.notes) options.log(note);
    return options;
}

std::optional<std::string> release_base_url(const std::optional<std::string>& flag) {
    std::optional<std::string> base = flag ? flag : get_env("CULINA_RELEASE_URL");
    if (!base || base->empty()) return std::nullopt;
    return base;
}

fetch::WheelExpectation expectation_for(const Manifest& manifest, const WheelEntry& wheel, const std::string& base_url) {
    return {fetch::asset_url(base_url, wheel.file), wheel.file, wheel.sha256, wheel.size, manifest.name, manifest.version};
}

}  // namespace culina::cli
