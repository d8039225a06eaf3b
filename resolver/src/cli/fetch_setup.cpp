#include "cli/fetch_setup.h"

#include <unistd.h>

#include <iostream>

#include "common/text.h"

namespace culina::cli {

fetch::FetchOptions fetch_options_for(const std::string& command, const std::optional<std::string>& cache_dir,
                                      bool allow_http) {
    fetch::FetchOptions options;
    options.settings = fetch::fetch_settings_from_environment();
    if (cache_dir) {
        options.settings.cache_root = fetch::resolve_cache_root([&](const char* name) -> std::optional<std::string> {
            if (std::string(name) == "CULINA_CACHE_DIR") return cache_dir;
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
    while (!base->empty() && base->back() == '/') base->pop_back();
    return base;
}

fetch::WheelExpectation expectation_for(const Manifest& manifest, const WheelEntry& wheel, const std::string& base_url) {
    return {base_url + "/" + wheel.file, wheel.file, wheel.sha256, wheel.size, manifest.name, manifest.version};
}

}  // namespace culina::cli
