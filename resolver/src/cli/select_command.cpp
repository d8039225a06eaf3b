#include <iostream>

#include "cli/commands.h"

namespace culina::cli {

int select_command(const Args&) {
    std::cerr << "culina-resolver select: not built yet\n";
    return 2;
}

}  // namespace culina::cli
