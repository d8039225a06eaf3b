#include <iostream>

#include "cli/commands.h"
#include "host/host_json.h"
#include "host/host_table.h"
#include "probe/probe.h"

namespace culina::cli {

int probe_command(const Args& args, const HelperSettings& settings) {
    bool json = false;
    for (const std::string& arg : args) {
        if (arg == "--json") {
            json = true;
        } else {
            std::cerr << "culina-resolver probe: unknown option '" << arg << "' (accepted: --json)\n";
            return exit_code(ExitStatus::bad_input);
        }
    }
    const HostInfo host = probe_host(settings.probe);
    if (json) {
        std::cout << host_json_text(host_to_json(host)) << "\n";
    } else {
        std::cout << host_to_table(host);
    }
    return exit_code(ExitStatus::ok);
}

}  // namespace culina::cli
