// The command line and inputs `select` and `resolve` share: manifest, tags, output form,
// local-build defaults; `resolve` adds where and how to fetch.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include "cli/commands.h"
#include "policy/select_wheel.h"
#include "settings/helper_settings.h"

namespace culina::cli {

// Exit statuses of `select` and `resolve`: 0 is a decision to act on.
constexpr int kExitBadInput = 2;      // a command line, file or setting that cannot be used
constexpr int kExitNoWayToServe = 3;  // the decision is an error: nothing can serve this host

struct SelectionOptions {
    std::string manifest_path;
    std::string tags_path;
    std::string default_archs;
    std::optional<std::string> pypi_toolkit_root;  // --pypi-toolkit: the installing Python's toolkit from PyPI
    bool json = false;
    bool help = false;
    // resolve only
    std::optional<std::string> manifest_url;  // instead of --manifest: fetched, for an sdist that carries none
    std::string project_name;                 // what a fetched manifest must describe (with --manifest-url)
    std::string project_version;
    std::optional<std::string> base_url;
    std::optional<std::string> cache_dir;
    bool allow_http = false;
};

// A problem with the command line or a file it names; what() says which and how to fix it.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Throws UsageError. `with_fetch` accepts --base-url, --cache-dir, --allow-http and --manifest-url
// (with --project and --project-version) in place of --manifest.
SelectionOptions parse_selection_options(const Args& args, bool with_fetch);

// Manifest, tags, default archs and the probe, with the parsed settings. Throws UsageError,
// ManifestError, PolicyInputError or FetchError(configuration), each naming the file or variable
// and the value. A manifest that cannot be fetched is logged and read as one listing no wheels.
SelectionInput load_selection_input(const SelectionOptions& options, const HelperSettings& settings);

// Parses the command line and loads the inputs; on a problem prints it (with `usage` for a
// command-line problem) as "culina-resolver <command>: ..." and returns false.
bool prepare_selection(const std::string& command, const Args& args, bool with_fetch, void (*usage)(std::ostream&),
                       const HelperSettings& settings, SelectionOptions& options, SelectionInput& input);

}  // namespace culina::cli
