// culina-resolver resolve: probe, select and fetch in one step, for the setup.py adapter.
// stdout: the decision (JSON with --json), including the verified wheel's path when one was
// fetched; stderr: a human log of what was decided and why, and download progress.
// A wheel that cannot be fetched or verified is never used: the policy's fallback decides.
// Exit statuses (common/error.h): ok, act on the decision; bad_input; no_way_to_serve.
#include <iostream>

#include "cli/commands.h"
#include "cli/fetch_setup.h"
#include "cli/selection_options.h"
#include "fetch/fetch_error.h"
#include "fetch/url_policy.h"
#include "host/host_json.h"
#include "manifest/manifest.h"
#include "policy/build_archs.h"

namespace culina::cli {
namespace {

void print_resolve_usage(std::ostream& out, const SettingNames& names) {
    out << "usage: culina-resolver resolve (--manifest FILE | (--manifest-url URL | --manifest-from-release)\n"
           "                                                   --project NAME --project-version V)\n"
           "                              --tags FILE [--base-url URL] [--cache-dir DIR]\n"
           "                              [--allow-http] [--json] [--default-archs LIST] [--pypi-toolkit ROOT]\n"
           "                              [--caller-states-decision]\n"
           "  probe this host, choose a wheel (as `select`), then download and verify it (as `fetch`).\n"
           "  When the chosen wheel cannot be fetched, the decision falls back to a local build, and\n"
           "  fetch_error says why; a wheel named by "
        << names.of("VARIANT") << ", one that fails its checksum (unless\n  " << names.of("BUILD_ON_MISMATCH")
        << "=1) and any build under " << names.of("ONLY_BINARY") << "=1 end in an error instead.\n"
           "  --manifest-url URL    fetch the manifest (an sdist that carries none); it must describe\n"
           "                        --project at --project-version. Not fetched offline or for a source\n"
           "                        build; one that cannot be fetched counts as listing no wheels\n"
           "  --manifest-from-release  as --manifest-url, at the release URL's release-manifest.json\n"
           "                        ("
        << names.of("RELEASE_URL") << ", which keeps credentials off the command line)\n"
           "  --base-url URL        release assets (default: "
        << names.of("RELEASE_URL") << "; a URL with credentials\n"
           "                        belongs in the variable: a command line is visible to every local user)\n"
           "  --cache-dir DIR       cache root (default: "
        << names.of("CACHE_DIR") << ", $XDG_CACHE_HOME/" << names.caller() << ", ~/.cache/" << names.caller() << ")\n"
           "  --allow-http          plain http beyond loopback: only when the manifest came inside the sdist\n"
           "  --default-archs LIST  local build targets when no GPU is visible (default "
        << kDefaultLocalBuildArchs
        << ")\n"
           "  --pypi-toolkit ROOT   a CUDA toolkit from NVIDIA's PyPI packages that the installing Python has,\n"
           "                        searched after PATH (CUDA_HOME, CUDA_PATH, PATH, ROOT, /usr/local/cuda)\n"
           "  --caller-states-decision  the caller prints the decision and an error's reason itself: the log\n"
           "                        leaves out the summary line and an error table's reason line\n"
           "environment: "
        << setting_list(names)
        << "\n"
           "exit status: 0 act on the decision, 2 bad input, 3 nothing can serve this host (reason printed)\n";
}

void log(const std::string& message) { std::cerr << "culina-resolver resolve: " << message << "\n"; }

struct Outcome {
    Decision decision;
    std::optional<fetch::FetchedWheel> wheel;
    std::optional<std::string> fetch_error;
};

// Throws FetchError(configuration) for settings that cannot be used.
Outcome fetch_chosen_wheel(const SelectionOptions& options, const HelperSettings& settings, const SelectionInput& input,
                           Decision decision) {
    const WheelEntry wheel = *decision.wheel;
    const fetch::FetchOptions fetch_options = fetch_options_for("resolve", settings, options.cache_dir, options.allow_http);
    const std::optional<std::string> base = release_base_url(options.base_url, settings);
    std::string why;
    FetchFailure failure = FetchFailure::unavailable;
    std::string shown_url = "no release URL";
    if (!base && !fetch_options.settings.offline) {
        why = no_release_url_message(settings);
    } else {
        const fetch::WheelExpectation expected = expectation_for(input.manifest, wheel, base.value_or("offline:"));
        shown_url = fetch::redacted_url(expected.url);
        try {
            return {decision, fetch::fetch_wheel(expected, fetch_options), std::nullopt};
        } catch (const fetch::FetchError& error) {
            if (error.kind == fetch::FetchError::Kind::configuration) throw;
            if (error.kind == fetch::FetchError::Kind::verification) failure = FetchFailure::verification;
            why = error.what();
        }
    }
    log("cannot use " + wheel.file + ": " + why);
    return {select_after_failed_fetch(input, wheel.file, shown_url, failure, why), std::nullopt, why};
}

}  // namespace

int resolve_command(const Args& args, const HelperSettings& settings) {
    const std::optional<SelectionOptions> parsed = selection_options_or_usage(
        "resolve", args, true, [&settings](std::ostream& out) { print_resolve_usage(out, settings.names); });
    if (!parsed) return exit_code(ExitStatus::bad_input);
    const SelectionOptions& options = *parsed;
    if (options.help) {
        print_resolve_usage(std::cout, settings.names);
        return exit_code(ExitStatus::ok);
    }
    const SelectionInput input = load_selection_input(options, settings);

    const bool with_reason = !options.caller_states_decision;
    Outcome outcome{select_wheel(input), std::nullopt, std::nullopt};
    std::cerr << decision_to_table(outcome.decision, settings.names, with_reason);
    if (outcome.decision.action == Action::install_wheel) {
        outcome = fetch_chosen_wheel(options, settings, input, outcome.decision);
        if (outcome.fetch_error) std::cerr << decision_to_table(outcome.decision, settings.names, with_reason);
    }

    const Decision& decision = outcome.decision;
    if (with_reason) {
        log(std::string("decided: ") + action_name(decision.action) + (outcome.wheel ? " " + outcome.wheel->path : "") +
            " — " + decision.reason);
    }
    if (options.json) {
        nlohmann::json out = decision_to_json(decision);
        out["probe"] = host_to_json(input.host);
        out["wheel_path"] = outcome.wheel ? nlohmann::json(outcome.wheel->path) : nlohmann::json(nullptr);
        // Folders this run made outside the cache (the wheel's, when the cache could not be used):
        // the caller removes them once it has delivered the wheel.
        out["private_folders"] = nlohmann::json::array();
        if (outcome.wheel && outcome.wheel->private_folder) out["private_folders"].push_back(*outcome.wheel->private_folder);
        out["fetch_error"] = outcome.fetch_error ? nlohmann::json(*outcome.fetch_error) : nlohmann::json(nullptr);
        std::cout << host_json_text(out) << "\n";
    } else {
        std::cout << action_name(decision.action) << (outcome.wheel ? " " + outcome.wheel->path : "") << "\n";
    }
    return exit_code(decision.action == Action::error ? ExitStatus::no_way_to_serve : ExitStatus::ok);
}

}  // namespace culina::cli
