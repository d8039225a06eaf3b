// culina-resolver mirror: fill a release folder that installs read through
// <PREFIX>RELEASE_URL=/that/folder (air-gapped and shared sites): every wheel of the manifest, or
// those of the given variants and platforms, downloaded, verified against the manifest and
// renamed into place. A run that stopped resumes where it was; wheels already there and verified
// are kept. Exit ok when every chosen wheel is there, failed when some could not be fetched,
// bad_input for bad usage (common/error.h).
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "cli/fetch_setup.h"
#include "common/text.h"
#include "fetch/fetch_error.h"
#include "fetch/fetch_wheel.h"
#include "fetch/wheel_cache.h"
#include "manifest/manifest.h"

namespace culina::cli {
namespace {

std::string mirror_usage(const SettingNames& names) {
    return "usage: culina-resolver mirror --manifest FILE --dest DIR [--base-url URL] [--variant LIST] [--platform LIST]\n"
           "                             [--allow-http]\n"
           "  --manifest FILE   the release's release-manifest.json (a release asset, also inside the sdist)\n"
           "  --dest DIR        the folder to fill; installs then read it with " + names.of("RELEASE_URL") + "=DIR\n"
           "  --base-url URL    where the release assets are (default: " + names.of("RELEASE_URL") + ")\n"
           "  --variant LIST    only these variant labels, e.g. cu129,cu130,null\n"
           "  --platform LIST   only wheels with a platform tag containing one of these, e.g. x86_64,manylinux_2_28_aarch64\n"
           "  --allow-http      permit plain http beyond loopback (the manifest holds the hashes)\n";
}

struct MirrorArgs {
    std::string manifest;
    std::string dest;
    std::optional<std::string> base_url;
    std::vector<std::string> variants;
    std::vector<std::string> platforms;
    bool allow_http = false;
};

int mirror_usage_error(const std::string& message, const SettingNames& names) {
    std::cerr << "culina-resolver mirror: " << message << "\n" << mirror_usage(names);
    return exit_code(ExitStatus::bad_input);
}

bool contains(const std::vector<std::string>& items, const std::string& item) {
    return std::find(items.begin(), items.end(), item) != items.end();
}

bool wanted(const MirrorArgs& args, const WheelEntry& wheel) {
    if (!args.variants.empty() && !contains(args.variants, wheel.variant)) return false;
    if (args.platforms.empty()) return true;
    for (const std::string& tag : wheel.tags) {
        const std::size_t platform_at = tag.rfind('-');
        const std::string platform = platform_at == std::string::npos ? tag : tag.substr(platform_at + 1);
        for (const std::string& wanted_platform : args.platforms) {
            if (platform.find(wanted_platform) != std::string::npos) return true;
        }
    }
    return false;
}

}  // namespace

int mirror_command(const Args& args, const HelperSettings& settings) {
    MirrorArgs parsed;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& flag = args[i];
        if (flag == "--help" || flag == "-h") {
            std::cout << mirror_usage(settings.names);
            return exit_code(ExitStatus::ok);
        }
        if (flag == "--allow-http") {
            parsed.allow_http = true;
            continue;
        }
        if (flag != "--manifest" && flag != "--dest" && flag != "--base-url" && flag != "--variant" &&
            flag != "--platform") {
            return mirror_usage_error("unknown option '" + flag + "'", settings.names);
        }
        if (i + 1 == args.size()) return mirror_usage_error(flag + " needs a value", settings.names);
        const std::string& value = args[++i];
        if (flag == "--manifest") parsed.manifest = value;
        if (flag == "--dest") parsed.dest = value;
        if (flag == "--base-url") parsed.base_url = value;
        if (flag == "--variant") parsed.variants = comma_list(value);
        if (flag == "--platform") parsed.platforms = comma_list(value);
    }
    if (parsed.manifest.empty()) return mirror_usage_error("--manifest is required", settings.names);
    if (parsed.dest.empty()) return mirror_usage_error("--dest is required", settings.names);
    const std::optional<std::string> base = release_base_url(parsed.base_url, settings);
    if (!base) return mirror_usage_error(no_release_url_message(settings), settings.names);

    const Manifest manifest = load_manifest(parsed.manifest);
    std::vector<const WheelEntry*> chosen;
    for (const WheelEntry& wheel : manifest.wheels) {
        if (wanted(parsed, wheel)) chosen.push_back(&wheel);
    }
    if (chosen.empty()) {
        std::cerr << "culina-resolver mirror: no wheel of the " << manifest.wheels.size() << " in " << parsed.manifest
                  << " matches --variant/--platform; nothing to do\n";
        return exit_code(ExitStatus::failed);
    }
    const std::string dest = std::filesystem::absolute(parsed.dest).lexically_normal().string();
    // Folders it creates are readable by every user of the site and written only by the
    // administrator; an existing folder keeps the mode its owner gave it.
    if (const auto problem = fetch::trusted_folder_problem(dest, fetch::FolderRule{false, 0755})) {
        std::cerr << "culina-resolver mirror: will not fill " << dest << ": " << *problem
                  << "; choose for --dest a real folder (not a link) that you own, under folders only you or root may "
                     "write\n";
        return exit_code(ExitStatus::bad_input);
    }
    const fetch::FetchOptions options = fetch_options_for("mirror", settings, std::nullopt, parsed.allow_http);
    int failed = 0;
    for (const WheelEntry* wheel : chosen) {
        try {
            fetch::fetch_into_folder(dest, expectation_for(manifest, *wheel, *base), options);
            ::chmod((dest + "/" + wheel->file).c_str(), 0644);
            std::cout << dest << "/" << wheel->file << "\n";
        } catch (const fetch::FetchError& error) {
            if (error.kind == fetch::FetchError::Kind::configuration) throw;
            std::cerr << "culina-resolver mirror: " << wheel->file << ": " << error.what() << "\n";
            ++failed;
        }
    }
    if (failed > 0) {
        std::cerr << "culina-resolver mirror: " << failed << " of " << chosen.size()
                  << " wheels could not be fetched; run the same command again to resume\n";
        return exit_code(ExitStatus::failed);
    }
    std::cerr << "culina-resolver mirror: " << chosen.size() << " wheel" << (chosen.size() == 1 ? "" : "s")
              << " verified in " << dest << "; installs use it with " << settings.names.of("RELEASE_URL") << "=" << dest
              << "\n";
    return exit_code(ExitStatus::ok);
}

}  // namespace culina::cli
