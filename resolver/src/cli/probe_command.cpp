#include <iostream>

#include "cli/commands.h"

namespace culina::cli {

int probe_command(const Args&) {
    std::cerr << "culina-resolver probe: not built yet\n";
    return 2;
}

}  // namespace culina::cli
