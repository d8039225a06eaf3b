#include "cli/selection_options.h"

#include <iostream>

#include "common/setting_error.h"
#include "common/text.h"
#include "manifest/manifest.h"
#include "policy/build_archs.h"
#include "policy/input_error.h"
#include "policy/tag_rank.h"
#include "policy/variant_request.h"
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
        std::string* value_slot = nullptr;
        std::optional<std::string>* optional_slot = nullptr;
        if (arg == "--manifest") value_slot = &options.manifest_path;
        if (arg == "--tags") value_slot = &options.tags_path;
        if (arg == "--default-archs") value_slot = &options.default_archs;
        if (with_fetch && arg == "--base-url") optional_slot = &options.base_url;
        if (with_fetch && arg == "--cache-dir") optional_slot = &options.cache_dir;
        if (value_slot == nullptr && optional_slot == nullptr) throw UsageError("unknown option '" + arg + "'");
        if (i + 1 == args.size()) throw UsageError(arg + " needs a value");
        if (value_slot) *value_slot = args[++i];
        if (optional_slot) *optional_slot = args[++i];
    }
    if (options.manifest_path.empty() || options.tags_path.empty()) {
        throw UsageError("--manifest and --tags are required");
    }
    return options;
}

SelectionInput load_selection_input(const SelectionOptions& options) {
    SelectionInput input;
    input.request = parse_variant_request(get_env(kVariantVariable));
    input.default_archs = parse_arch_list(options.default_archs, "--default-archs");
    input.manifest = load_manifest(options.manifest_path);
    const std::optional<std::string> tags_text = read_text_file(options.tags_path);
    if (!tags_text) throw UsageError("tags file " + options.tags_path + " cannot be read (missing or unreadable)");
    input.supported_tags = parse_supported_tags(*tags_text, options.tags_path);
    input.host = probe_host();
    return input;
}

bool prepare_selection(const std::string& command, const Args& args, bool with_fetch, void (*usage)(std::ostream&),
                       SelectionOptions& options, SelectionInput& input) {
    const std::string prefix = "culina-resolver " + command + ": ";
    try {
        options = parse_selection_options(args, with_fetch);
        if (!options.help) input = load_selection_input(options);
        return true;
    } catch (const UsageError& error) {
        std::cerr << prefix << error.what() << "\n";
        usage(std::cerr);
    } catch (const ManifestError& error) {
        std::cerr << prefix << error.what() << "\n";
    } catch (const SettingError& error) {
        std::cerr << prefix << error.what() << "\n";
    } catch (const PolicyInputError& error) {
        std::cerr << prefix << error.what() << "\n";
    }
    return false;
}

}  // namespace culina::cli
