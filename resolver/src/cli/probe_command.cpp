#include <iostream>

#include "cli/commands.h"
#include "common/setting_error.h"
#include "host/host_json.h"
#include "host/host_table.h"
#include "probe/probe.h"

namespace culina::cli {

int probe_command(const Args& args) {
    bool json = false;
    for (const std::string& arg : args) {
        if (arg == "--json") {
            json = true;
        } else {
            std::cerr << "culina-resolver probe: unknown option '" << arg << "' (accepted: --json)\n";
            return 2;
        }
    }
    try {
        const HostInfo host = probe_host();
        if (json) {
            std::cout << host_to_json(host).dump(2) << "\n";
        } else {
            std::cout << host_to_table(host);
        }
        return 0;
    } catch (const SettingError& error) {
        std::cerr << "culina-resolver probe: " << error.what() << "\n";
        return 2;
    }
}

}  // namespace culina::cli
