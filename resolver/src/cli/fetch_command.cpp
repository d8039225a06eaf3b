#include <iostream>

#include "cli/commands.h"

namespace culina::cli {

int fetch_command(const Args&) {
    std::cerr << "culina-resolver fetch: not built yet\n";
    return 2;
}

}  // namespace culina::cli
