// culina-resolver select: probe this host, read the release manifest and the interpreter's
// tags, and print the policy's decision. Exit ok: a decision (a wheel or a build); bad_input:
// input that cannot be used; no_way_to_serve: nothing can serve this host as asked (common/error.h).
#include <iostream>

#include "cli/commands.h"
#include "cli/selection_options.h"
#include "host/host_json.h"
#include "policy/build_archs.h"

namespace culina::cli {
namespace {

void print_select_usage(std::ostream& out, const SettingNames& names) {
    out << "usage: culina-resolver select --manifest FILE --tags FILE [--json] [--default-archs LIST]\n"
           "                             [--pypi-toolkit ROOT]\n"
           "  --manifest FILE       release-manifest.json\n"
           "  --tags FILE           the interpreter's supported wheel tags, one per line, best first\n"
           "  --json                print one JSON object instead of a table\n"
           "  --default-archs LIST  local build targets when no GPU is visible (default "
        << kDefaultLocalBuildArchs
        << ")\n"
           "  --pypi-toolkit ROOT   a CUDA toolkit from NVIDIA's PyPI packages that the installing Python has,\n"
           "                        searched after PATH (CUDA_HOME, CUDA_PATH, PATH, ROOT, /usr/local/cuda)\n"
           "environment: "
        << names.of("VARIANT") << " (auto | a release label | null/cpu | source), and the probe's\n"
        << names.of("OVERRIDE_CUDA") << " / " << names.of("OVERRIDE_SM") << "\n"
           "exit status: 0 a decision, 2 bad input, 3 nothing can serve this host (reason printed)\n";
}

}  // namespace

int select_command(const Args& args, const HelperSettings& settings) {
    const std::optional<SelectionOptions> options = selection_options_or_usage(
        "select", args, false, [&settings](std::ostream& out) { print_select_usage(out, settings.names); });
    if (!options) return exit_code(ExitStatus::bad_input);
    if (options->help) {
        print_select_usage(std::cout, settings.names);
        return exit_code(ExitStatus::ok);
    }

    const SelectionInput input = load_selection_input(*options, settings);
    const Decision decision = select_wheel(input);
    if (options->json) {
        nlohmann::json out = decision_to_json(decision);
        out["probe"] = host_to_json(input.host);
        std::cout << host_json_text(out) << "\n";
    } else {
        std::cout << decision_to_table(decision, settings.names);
    }
    if (decision.action == Action::error) {
        std::cerr << "culina-resolver select: " << decision.reason << "\n";
        return exit_code(ExitStatus::no_way_to_serve);
    }
    return exit_code(ExitStatus::ok);
}

}  // namespace culina::cli
