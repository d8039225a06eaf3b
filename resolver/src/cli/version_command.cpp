// culina-resolver version: which sources this binary was built from. The install adapter runs it
// before trusting a prebuilt helper from the sdist: the answer must name the hash of the sources
// the sdist carries (CULINA_HELPER_SOURCE_HASH, set by the adapter's build), proving the binary
// starts on this host and belongs to this release.
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"

#ifndef CULINA_HELPER_SOURCE_HASH
#define CULINA_HELPER_SOURCE_HASH ""  // a development build (CMake): no hash to answer with
#endif

namespace culina::cli {

int version_command(const Args& args) {
    const bool json = args.size() == 1 && args[0] == "--json";
    if (!args.empty() && !json) {
        std::cerr << "usage: culina-resolver version [--json]\n";
        return args[0] == "--help" || args[0] == "-h" ? 0 : 2;
    }
#ifdef CULINA_HAVE_CPUINFO
    constexpr bool cpuinfo = true;
#else
    constexpr bool cpuinfo = false;
#endif
    if (json) {
        std::cout << nlohmann::json{{"source_hash", CULINA_HELPER_SOURCE_HASH},
                                    {"compiler", __VERSION__},
                                    {"cpuinfo", cpuinfo}}
                         .dump()
                  << "\n";
    } else {
        std::cout << "culina-resolver, sources " << (*CULINA_HELPER_SOURCE_HASH ? CULINA_HELPER_SOURCE_HASH : "unknown")
                  << ", built with " << __VERSION__ << (cpuinfo ? ", cpuinfo" : "") << "\n";
    }
    return 0;
}

}  // namespace culina::cli
