// culina-resolver: the install-time helper. Sub-commands live in their own files.
#include <csignal>
#include <cstring>
#include <iostream>

#include "cli/commands.h"

namespace {

struct Command {
    const char* name;
    int (*run)(const culina::cli::Args&);
    const char* summary;
};

const Command kCommands[] = {
    {"probe", culina::cli::probe_command, "describe this host (OS, CPU, driver, GPUs, toolkit) [--json]"},
    {"select", culina::cli::select_command, "choose a wheel: --manifest FILE --tags FILE [--json]"},
    {"fetch", culina::cli::fetch_command, "download and verify: --manifest FILE --file WHEEL [--base-url URL] [--cache-dir DIR]"},
    {"resolve", culina::cli::resolve_command, "probe, select and fetch: --manifest FILE|--manifest-url URL --tags FILE [--json]"},
    {"mirror", culina::cli::mirror_command, "fill a local release folder for CULINA_RELEASE_URL: --manifest FILE --dest DIR [--base-url URL]"},
    {"manifest", culina::cli::manifest_command, "write release-manifest.json: init | add --wheel PATH (release scripts)"},
    {"version", culina::cli::version_command, "the sources this binary was built from, for the install's handshake [--json]"},
};

void print_commands(std::ostream& out) {
    out << "usage: culina-resolver <command> [options]\n\ncommands:\n";
    for (const Command& command : kCommands) out << "  " << command.name << "\t" << command.summary << "\n";
}

}  // namespace

int main(int argc, char** argv) {
    // Past a file-size limit (ulimit -f) a write then fails with EFBIG and a message naming the
    // file, instead of the default SIGXFSZ killing the helper without a word.
    std::signal(SIGXFSZ, SIG_IGN);
    if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
        print_commands(argc < 2 ? std::cerr : std::cout);
        return argc < 2 ? 2 : 0;
    }
    const culina::cli::Args args(argv + 2, argv + argc);
    for (const Command& command : kCommands) {
        if (std::strcmp(argv[1], command.name) == 0) return command.run(args);
    }
    std::cerr << "culina-resolver: unknown command '" << argv[1] << "'\n";
    print_commands(std::cerr);
    return 2;
}
