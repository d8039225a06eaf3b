// culina-resolver: the install-time helper. Sub-commands live in their own files.
//   culina-resolver [--env-prefix PREFIX] <command> [options]
// The settings a command reads are parsed here, once, before the command runs; every Error a
// command throws ends here, printed once, its status the exit status (common/error.h).
#include <csignal>
#include <cstring>
#include <iostream>

#include "cli/commands.h"
#include "common/error.h"
#include "common/text.h"

namespace {

struct Command {
    const char* name;
    int (*run_with_settings)(const culina::cli::Args&, const culina::HelperSettings&);  // reads settings
    int (*run)(const culina::cli::Args&);                                                // reads none
    int (*run_with_names)(const culina::cli::Args&, const culina::SettingNames&);        // names them, reads none
    const char* summary;
};

const Command kCommands[] = {
    {"probe", culina::cli::probe_command, nullptr, nullptr, "describe this host (OS, CPU, driver, GPUs, toolkit) [--json]"},
    {"select", culina::cli::select_command, nullptr, nullptr, "choose a wheel: --manifest FILE --tags FILE [--json]"},
    {"fetch", culina::cli::fetch_command, nullptr, nullptr,
     "download and verify: --manifest FILE --file WHEEL [--base-url URL] [--cache-dir DIR]"},
    {"resolve", culina::cli::resolve_command, nullptr, nullptr,
     "probe, select and fetch: --manifest FILE|--manifest-url URL --tags FILE [--json]"},
    {"mirror", culina::cli::mirror_command, nullptr, nullptr,
     "fill a local release folder for <PREFIX>RELEASE_URL: --manifest FILE --dest DIR [--base-url URL]"},
    {"manifest", nullptr, culina::cli::manifest_command, nullptr, "write release-manifest.json: init | add --wheel PATH (release scripts)"},
    {"version", nullptr, nullptr, culina::cli::version_command,
     "the sources this binary was built from, for the install's handshake; --json adds the settings table"},
};

void print_commands(std::ostream& out) {
    out << "usage: culina-resolver [--env-prefix PREFIX] <command> [options]\n\n"
           "  --env-prefix PREFIX  the settings are the environment variables PREFIX + VARIANT, OFFLINE, ...\n"
           "                       (default "
        << culina::kDefaultEnvPrefix << "; [A-Z][A-Z0-9_]*_)\n\ncommands:\n";
    for (const Command& command : kCommands) out << "  " << command.name << "\t" << command.summary << "\n";
}

bool asks_for_help(const culina::cli::Args& args) {
    for (const std::string& arg : args) {
        if (arg == "--help" || arg == "-h") return true;
    }
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    // Past a file-size limit (ulimit -f) a write then fails with EFBIG and a message naming the
    // file, instead of the default SIGXFSZ killing the helper without a word.
    std::signal(SIGXFSZ, SIG_IGN);
    culina::SettingNames names;
    int at = 1;
    if (at < argc && std::strcmp(argv[at], "--env-prefix") == 0) {
        if (at + 1 == argc || !culina::is_valid_env_prefix(argv[at + 1])) {
            std::cerr << "culina-resolver: --env-prefix '" << (at + 1 == argc ? "" : culina::printable(argv[at + 1]))
                      << "' is not a prefix: give upper-case letters, digits and '_', starting with a letter and "
                         "ending in '_', like MYPROJ_\n";
            return culina::exit_code(culina::ExitStatus::bad_input);
        }
        names.prefix = argv[at + 1];
        at += 2;
    }
    if (at == argc || std::strcmp(argv[at], "--help") == 0 || std::strcmp(argv[at], "-h") == 0) {
        print_commands(at == argc ? std::cerr : std::cout);
        return culina::exit_code(at == argc ? culina::ExitStatus::bad_input : culina::ExitStatus::ok);
    }
    const culina::cli::Args args(argv + at + 1, argv + argc);
    for (const Command& command : kCommands) {
        if (std::strcmp(argv[at], command.name) != 0) continue;
        try {
            if (command.run) return command.run(args);
            if (command.run_with_names) return command.run_with_names(args, names);
            const culina::HelperSettings settings = asks_for_help(args)
                                                        ? culina::default_helper_settings(names)
                                                        : culina::parse_helper_settings(names, culina::process_environment());
            return command.run_with_settings(args, settings);
        } catch (const culina::Error& error) {
            std::cerr << "culina-resolver " << command.name << ": " << culina::printable(error.what()) << "\n";
            return culina::exit_code(error.status);
        } catch (const std::exception& error) {
            std::cerr << "culina-resolver " << command.name << ": unexpected failure: " << culina::printable(error.what())
                      << "\n";
            return culina::exit_code(culina::ExitStatus::failed);
        }
    }
    std::cerr << "culina-resolver: unknown command '" << culina::printable(argv[at]) << "'\n";
    print_commands(std::cerr);
    return culina::exit_code(culina::ExitStatus::bad_input);
}
