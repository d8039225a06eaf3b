// The command line and inputs `select` and `resolve` share: manifest, tags, output form,
// local-build defaults; `resolve` adds where and how to fetch.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "policy/select_wheel.h"
#include "settings/helper_settings.h"

namespace culina::cli {

struct SelectionOptions {
    std::string manifest_path;
    std::string tags_path;
    std::string default_archs;
    std::optional<std::string> pypi_toolkit_root;  // --pypi-toolkit: the installing Python's toolkit from PyPI
    bool json = false;
    bool help = false;
    // resolve only
    std::optional<std::string> manifest_url;  // instead of --manifest: fetched, for an sdist that carries none
    bool manifest_from_release = false;       // instead of --manifest: the release URL's release-manifest.json
    std::string project_name;                 // what a fetched manifest must describe
    std::string project_version;
    std::optional<std::string> base_url;
    std::optional<std::string> cache_dir;
    bool allow_http = false;
    // --caller-states-decision: the caller (the install adapter) states the decision and an
    // error's reason itself, so the log leaves out its summary line and an error table's reason.
    bool caller_states_decision = false;
};

// Throws UsageError. `with_fetch` accepts --base-url, --cache-dir, --allow-http, and --manifest-url
// or --manifest-from-release (with --project and --project-version) in place of --manifest.
SelectionOptions parse_selection_options(const Args& args, bool with_fetch);

// Manifest, tags, default archs and the probe, with the parsed settings. Throws UsageError,
// ManifestError, PolicyInputError or FetchError(configuration), each naming the file or variable
// and the value. A manifest that cannot be fetched is logged and read as one listing no wheels.
SelectionInput load_selection_input(const SelectionOptions& options, const HelperSettings& settings);

// The command line, or nullopt after printing a problem with it and `usage` as
// "culina-resolver <command>: ...".
std::optional<SelectionOptions> selection_options_or_usage(const std::string& command, const Args& args, bool with_fetch,
                                                           const std::function<void(std::ostream&)>& usage);

}  // namespace culina::cli
