// `culina-resolver fetch`: download and verify one wheel of the manifest into the cache and
// print its path. Exit ok with the path on stdout; failed when the fetch failed (offline and not
// cached included); bad_input for bad usage or settings (common/error.h). Everything else goes to stderr.
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "cli/fetch_setup.h"
#include "fetch/fetch_error.h"
#include "fetch/fetch_wheel.h"
#include "manifest/manifest.h"

namespace culina::cli {
namespace {

std::string fetch_usage(const SettingNames& names) {
    return "usage: culina-resolver fetch --manifest FILE --file WHEEL [--base-url URL] [--cache-dir DIR] [--allow-http]\n"
           "  --manifest FILE   release-manifest.json holding WHEEL's sha256 and size\n"
           "  --file WHEEL      the asset to fetch, as named in the manifest\n"
           "  --base-url URL    where the release assets are (default: " + names.of("RELEASE_URL") +
           "); fetches <URL>/<WHEEL>;\n"
           "                    a local folder (/path or file:///path) is read, never written\n"
           "  --cache-dir DIR   cache root (default: " + names.of("CACHE_DIR") + ", $XDG_CACHE_HOME/" + names.caller() +
           ", ~/.cache/" + names.caller() + ")\n"
           "  --allow-http      permit plain http beyond loopback: only when the manifest came inside the sdist\n";
}

struct FetchArgs {
    std::string manifest;
    std::string file;
    std::optional<std::string> base_url;
    std::optional<std::string> cache_dir;
    bool allow_http = false;
};

int fetch_usage_error(const std::string& message, const SettingNames& names) {
    std::cerr << "culina-resolver fetch: " << message << "\n" << fetch_usage(names);
    return exit_code(ExitStatus::bad_input);
}

}  // namespace

int fetch_command(const Args& args, const HelperSettings& settings) {
    FetchArgs parsed;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& flag = args[i];
        if (flag == "--help" || flag == "-h") {
            std::cout << fetch_usage(settings.names);
            return exit_code(ExitStatus::ok);
        }
        if (flag == "--allow-http") {
            parsed.allow_http = true;
            continue;
        }
        if (flag != "--manifest" && flag != "--file" && flag != "--base-url" && flag != "--cache-dir") {
            return fetch_usage_error("unknown option '" + flag + "'", settings.names);
        }
        if (i + 1 == args.size()) return fetch_usage_error(flag + " needs a value", settings.names);
        const std::string& value = args[++i];
        if (flag == "--manifest") parsed.manifest = value;
        if (flag == "--file") parsed.file = value;
        if (flag == "--base-url") parsed.base_url = value;
        if (flag == "--cache-dir") parsed.cache_dir = value;
    }
    if (parsed.manifest.empty()) return fetch_usage_error("--manifest is required", settings.names);
    if (parsed.file.empty()) return fetch_usage_error("--file is required", settings.names);
    const std::optional<std::string> base = release_base_url(parsed.base_url, settings);
    if (!base) return fetch_usage_error(no_release_url_message(settings), settings.names);

    const Manifest manifest = load_manifest(parsed.manifest);
    const WheelEntry* entry = nullptr;
    for (const WheelEntry& wheel : manifest.wheels) {
        if (wheel.file == parsed.file) entry = &wheel;
    }
    if (entry == nullptr) {
        throw UsageError(parsed.manifest + " lists no wheel named '" + parsed.file + "' (it lists " +
                         std::to_string(manifest.wheels.size()) + "); pass one of its \"file\" values");
    }
    const fetch::FetchOptions options = fetch_options_for("fetch", settings, parsed.cache_dir, parsed.allow_http);
    std::cout << fetch::fetch_wheel(expectation_for(manifest, *entry, *base), options).path << "\n";
    return exit_code(ExitStatus::ok);
}

}  // namespace culina::cli
