#include "cli/fetch_setup.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "common/text.h"
#include "fetch/release_location.h"

namespace culina::cli {

fetch::FetchOptions fetch_options_for(const std::string& command, const HelperSettings& settings,
                                      const std::optional<std::string>& cache_dir, bool allow_http) {
    const EnvLookup host_env = process_environment();
    fetch::FetchOptions options;
    options.settings = fetch::with_host_ca_bundle(settings.fetch, host_env);
    if (cache_dir) {
        // A path on the command line is relative to where the command runs, as for any tool.
        options.settings.cache_dir = starts_with(*cache_dir, "~") ? *cache_dir : std::filesystem::absolute(*cache_dir).string();
    }
    options.settings.cache_root = fetch::resolve_cache_root(options.settings.cache_dir, settings.names, host_env);
    options.allow_http = allow_http;
    const std::string prefix = "culina-resolver " + command + ": ";
    options.log = [prefix](const std::string& message) { std::cerr << prefix << message << "\n"; };
    options.progress_out = &std::cerr;
    options.progress_redraw = ::isatty(STDERR_FILENO) == 1;
    for (const std::string& note : options.settings.notes) options.log(note);
    return options;
}

std::optional<std::string> release_base_url(const std::optional<std::string>& flag, const HelperSettings& settings) {
    if (flag && !flag->empty()) return flag;
    return settings.release_url;
}

std::string no_release_url_message(const HelperSettings& settings) {
    return "no release URL: pass --base-url or set " + settings.names.of("RELEASE_URL");
}

fetch::WheelExpectation expectation_for(const Manifest& manifest, const WheelEntry& wheel, const std::string& base_url) {
    return {fetch::asset_url(base_url, wheel.file), wheel.file, wheel.sha256, wheel.size, manifest.name, manifest.version};
}

}  // namespace culina::cli
