#include "cli/selection_options.h"

#include <iostream>

#include "cli/fetch_setup.h"
#include "common/text.h"
#include "fetch/fetch_error.h"
#include "fetch/fetch_manifest.h"
#include "fetch/release_location.h"
#include "fetch/url_policy.h"
#include "manifest/manifest.h"
#include "manifest/wheel_filename.h"
#include "policy/build_archs.h"
#include "policy/input_error.h"
#include "policy/tag_rank.h"
#include "probe/probe.h"

namespace culina::cli {

SelectionOptions parse_selection_options(const Args& args, bool with_fetch) {
    SelectionOptions options;
    options.default_archs = kDefaultLocalBuildArchs;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        if (arg == "--help" || arg == "-h") {
            options.help = true;
            return options;
        }
        if (arg == "--json") {
            options.json = true;
            continue;
        }
        if (with_fetch && arg == "--allow-http") {
            options.allow_http = true;
            continue;
        }
        if (with_fetch && arg == "--manifest-from-release") {
            options.manifest_from_release = true;
            continue;
        }
        if (with_fetch && arg == "--caller-states-decision") {
            options.caller_states_decision = true;
            continue;
        }
        std::string* value_slot = nullptr;
        std::optional<std::string>* optional_slot = nullptr;
        if (arg == "--manifest") value_slot = &options.manifest_path;
        if (arg == "--tags") value_slot = &options.tags_path;
        if (arg == "--default-archs") value_slot = &options.default_archs;
        if (with_fetch && arg == "--base-url") optional_slot = &options.base_url;
        if (with_fetch && arg == "--cache-dir") optional_slot = &options.cache_dir;
        if (arg == "--pypi-toolkit") optional_slot = &options.pypi_toolkit_root;
        if (with_fetch && arg == "--manifest-url") optional_slot = &options.manifest_url;
        if (with_fetch && arg == "--project") value_slot = &options.project_name;
        if (with_fetch && arg == "--project-version") value_slot = &options.project_version;
        if (value_slot == nullptr && optional_slot == nullptr) throw UsageError("unknown option '" + arg + "'");
        if (i + 1 == args.size()) throw UsageError(arg + " needs a value");
        if (value_slot) *value_slot = args[++i];
        if (optional_slot) *optional_slot = args[++i];
    }
    const int manifest_sources = !options.manifest_path.empty() + options.manifest_url.has_value() + options.manifest_from_release;
    if (manifest_sources > 1) throw UsageError("give one of --manifest, --manifest-url and --manifest-from-release");
    if (manifest_sources == 0) {
        throw UsageError(with_fetch ? "--manifest, --manifest-url or --manifest-from-release is required" : "--manifest is required");
    }
    if (options.manifest_path.empty() && (options.project_name.empty() || options.project_version.empty())) {
        throw UsageError(std::string(options.manifest_url ? "--manifest-url" : "--manifest-from-release") +
                         " needs --project and --project-version: what the manifest must describe");
    }
    if (options.tags_path.empty()) throw UsageError("--tags is required");
    return options;
}

namespace {

void log_manifest(const std::string& message) { std::cerr << "culina-resolver resolve: release manifest: " << message << "\n"; }

// The manifest at --manifest-url or in the release (--manifest-from-release), checked to describe
// this project. With none (offline, a source build, no release URL, or a failed fetch) it lists no
// wheels, so the policy still decides how to build, and `unavailable` says why for its reasons.
struct FetchedManifest {
    Manifest manifest;
    std::optional<std::string> unavailable;
};

FetchedManifest fetched_manifest(const SelectionOptions& options, const HelperSettings& settings) {
    FetchedManifest none;
    none.manifest.name = options.project_name;
    none.manifest.version = options.project_version;
    const auto without = [&](const std::string& why) {
        log_manifest(why + ": no prebuilt wheel can be chosen");
        none.unavailable = "the release manifest " + why;
        return none;
    };
    const std::optional<std::string> base = release_base_url(options.base_url, settings);
    if (!options.manifest_url && !base) return without("has no address (" + no_release_url_message(settings) + ")");
    const std::string url = options.manifest_url ? *options.manifest_url : fetch::asset_url(*base, fetch::kManifestAssetName);
    const std::string shown_url = fetch::redacted_url(url);
    if (settings.fetch.offline || settings.variant.kind == VariantRequest::Kind::source) {
        return without("was not fetched (" +
                       (settings.fetch.offline ? settings.names.of("OFFLINE") + "=1" : settings.names.of("VARIANT") + "=source") +
                       ")");
    }
    fetch::FetchOptions fetch_options;
    fetch_options.settings = fetch::with_host_ca_bundle(settings.fetch, process_environment());
    fetch_options.log = [](const std::string& message) { log_manifest(message); };
    try {
        Manifest manifest = parse_manifest(fetch::fetch_manifest_text(url, fetch_options));
        if (normalize_distribution_name(manifest.name) != normalize_distribution_name(options.project_name) ||
            manifest.version != options.project_version) {
            return without("at " + shown_url + " describes " + manifest.name + " " + printable(manifest.version) + ", not " +
                           options.project_name + " " + options.project_version + " (check " +
                           settings.names.of("RELEASE_URL") + ")");
        }
        log_manifest(shown_url + " (this sdist carries none)");
        return {manifest, std::nullopt};
    } catch (const fetch::FetchError& error) {
        if (error.kind == fetch::FetchError::Kind::configuration) throw;
        return without("is not available from " + shown_url + " (" + error.what() + ")");
    } catch (const ManifestError& error) {
        return without("at " + shown_url + " is not usable (" + printable(error.what()) + ")");
    }
}

}  // namespace

SelectionInput load_selection_input(const SelectionOptions& options, const HelperSettings& settings) {
    SelectionInput input;
    input.names = settings.names;
    input.request = settings.variant;
    input.default_archs = parse_arch_list(options.default_archs, "--default-archs");
    if (options.manifest_path.empty()) {
        FetchedManifest fetched = fetched_manifest(options, settings);
        input.manifest = std::move(fetched.manifest);
        input.manifest_unavailable = std::move(fetched.unavailable);
    } else {
        input.manifest = load_manifest(options.manifest_path);
    }
    const std::optional<std::string> tags_text = read_text_file(options.tags_path);
    if (!tags_text) throw UsageError("tags file " + options.tags_path + " cannot be read (missing or unreadable)");
    input.supported_tags = parse_supported_tags(*tags_text, options.tags_path);
    input.pypi_toolkit_allowed = !settings.fetch.offline;
    input.fallback = settings.fallback;
    ProbeSettings probe_settings = settings.probe;
    probe_settings.pypi_toolkit_root = options.pypi_toolkit_root;
    input.host = probe_host(probe_settings);
    return input;
}

std::optional<SelectionOptions> selection_options_or_usage(const std::string& command, const Args& args, bool with_fetch,
                                                           const std::function<void(std::ostream&)>& usage) {
    try {
        return parse_selection_options(args, with_fetch);
    } catch (const UsageError& error) {
        std::cerr << "culina-resolver " << command << ": " << error.what() << "\n";
        usage(std::cerr);
        return std::nullopt;
    }
}

}  // namespace culina::cli
