// culina-resolver select: probe this host, read the release manifest and the interpreter's
// tags, and print the policy's decision. Exit 0: a decision (a wheel or a build); 2: input
// that cannot be used; 3: the decision is an error (nothing can serve this host as asked).
#include <iostream>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "common/setting_error.h"
#include "common/text.h"
#include "host/host_json.h"
#include "manifest/manifest.h"
#include "policy/build_archs.h"
#include "policy/input_error.h"
#include "policy/select_wheel.h"
#include "policy/tag_rank.h"
#include "probe/probe.h"

namespace culina::cli {
namespace {

constexpr int kExitBadInput = 2;
constexpr int kExitNoWayToServe = 3;

void print_usage(std::ostream& out) {
    out << "usage: culina-resolver select --manifest FILE --tags FILE [--json] [--default-archs LIST]\n"
           "  --manifest FILE       release-manifest.json\n"
           "  --tags FILE           the interpreter's supported wheel tags, one per line, best first\n"
           "  --json                print one JSON object instead of a table\n"
           "  --default-archs LIST  local build targets when no GPU is visible (default "
        << kDefaultLocalBuildArchs
        << ")\n"
           "environment: CULINA_VARIANT (auto | a release label | null/cpu | source), and the probe's\n"
           "CULINA_OVERRIDE_CUDA / CULINA_OVERRIDE_SM\n"
           "exit status: 0 a decision, 2 bad input, 3 nothing can serve this host (reason printed)\n";
}

struct SelectOptions {
    std::string manifest_path;
    std::string tags_path;
    bool json = false;
    bool help = false;
    std::string default_archs = kDefaultLocalBuildArchs;
};

// nullopt after printing what is wrong with the command line.
std::optional<SelectOptions> parse_options(const Args& args) {
    SelectOptions options;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        std::string* value_slot = nullptr;
        if (arg == "--json") {
            options.json = true;
            continue;
        }
        if (arg == "--help" || arg == "-h") {
            options.help = true;
            return options;
        }
        if (arg == "--manifest") value_slot = &options.manifest_path;
        if (arg == "--tags") value_slot = &options.tags_path;
        if (arg == "--default-archs") value_slot = &options.default_archs;
        if (value_slot == nullptr) {
            std::cerr << "culina-resolver select: unknown option '" << arg << "'\n";
            print_usage(std::cerr);
            return std::nullopt;
        }
        if (i + 1 == args.size()) {
            std::cerr << "culina-resolver select: " << arg << " needs a value\n";
            return std::nullopt;
        }
        *value_slot = args[++i];
    }
    if (options.manifest_path.empty() || options.tags_path.empty()) {
        std::cerr << "culina-resolver select: --manifest and --tags are required\n";
        print_usage(std::cerr);
        return std::nullopt;
    }
    return options;
}

}  // namespace

int select_command(const Args& args) {
    const std::optional<SelectOptions> options = parse_options(args);
    if (!options) return kExitBadInput;
    if (options->help) {
        print_usage(std::cout);
        return 0;
    }
    SelectionInput input;
    try {
        input.request = parse_variant_request(get_env(kVariantVariable));
        input.default_archs = parse_arch_list(options->default_archs, "--default-archs");
        input.manifest = load_manifest(options->manifest_path);
        const std::optional<std::string> tags_text = read_text_file(options->tags_path);
        if (!tags_text) {
            std::cerr << "culina-resolver select: tags file " << options->tags_path << " cannot be read (missing or unreadable)\n";
            return kExitBadInput;
        }
        input.supported_tags = parse_supported_tags(*tags_text, options->tags_path);
        input.host = probe_host();
    } catch (const ManifestError& error) {
        std::cerr << "culina-resolver select: " << error.what() << "\n";
        return kExitBadInput;
    } catch (const SettingError& error) {
        std::cerr << "culina-resolver select: " << error.what() << "\n";
        return kExitBadInput;
    } catch (const PolicyInputError& error) {
        std::cerr << "culina-resolver select: " << error.what() << "\n";
        return kExitBadInput;
    }

    const Decision decision = select_wheel(input);
    if (options->json) {
        nlohmann::json out = decision_to_json(decision);
        out["probe"] = host_to_json(input.host);
        std::cout << out.dump(2) << "\n";
    } else {
        std::cout << decision_to_table(decision);
    }
    if (decision.action == Action::error) {
        std::cerr << "culina-resolver select: " << decision.reason << "\n";
        return kExitNoWayToServe;
    }
    return 0;
}

}  // namespace culina::cli
