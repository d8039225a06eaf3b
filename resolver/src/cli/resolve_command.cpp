#include <iostream>

#include "cli/commands.h"

namespace culina::cli {

int resolve_command(const Args&) {
    std::cerr << "culina-resolver resolve: not built yet\n";
    return 2;
}

}  // namespace culina::cli
