// culina-resolver version: which sources this binary was built from. The install adapter runs it
// before trusting a prebuilt helper from the sdist: the answer must name the hash of the sources
// the sdist carries (CULINA_HELPER_SOURCE_HASH, set by the adapter's build), proving the binary
// starts on this host and belongs to this release. --json also lists the exit statuses and the
// settings table under the caller's prefix (--env-prefix): each variable's name, suffix, type,
// default and accepted form, which the adapter and the tests check against.
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"

#ifndef CULINA_HELPER_SOURCE_HASH
#define CULINA_HELPER_SOURCE_HASH ""  // a development build (CMake): no hash to answer with
#endif

namespace culina::cli {

int version_command(const Args& args, const SettingNames& names) {
    const bool json = args.size() == 1 && args[0] == "--json";
    if (!args.empty() && !json) {
        std::cerr << "usage: culina-resolver version [--json]\n";
        return exit_code(args[0] == "--help" || args[0] == "-h" ? ExitStatus::ok : ExitStatus::bad_input);
    }
#ifdef CULINA_HAVE_CPUINFO
    constexpr bool cpuinfo = true;
#else
    constexpr bool cpuinfo = false;
#endif
    if (json) {
        nlohmann::json statuses = nlohmann::json::object();
        for (const ExitStatusName& entry : kExitStatusNames) statuses[entry.name] = exit_code(entry.status);
        nlohmann::json settings = nlohmann::json::array();
        for (const SettingSpec& spec : setting_specs()) {
            settings.push_back({{"name", names.of(spec.suffix)},
                                {"suffix", spec.suffix},
                                {"type", spec.type},
                                {"default", spec.shown_default(names)},
                                {"accepted", shown(spec.accepted, names)}});
        }
        std::cout << nlohmann::json{{"source_hash", CULINA_HELPER_SOURCE_HASH},
                                    {"compiler", __VERSION__},
                                    {"cpuinfo", cpuinfo},
                                    {"default_env_prefix", kDefaultEnvPrefix},
                                    {"env_prefix", names.prefix},
                                    {"exit_statuses", statuses},
                                    {"settings", settings}}
                         .dump()
                  << "\n";
    } else {
        std::cout << "culina-resolver, sources " << (*CULINA_HELPER_SOURCE_HASH ? CULINA_HELPER_SOURCE_HASH : "unknown")
                  << ", built with " << __VERSION__ << (cpuinfo ? ", cpuinfo" : "") << "\n";
    }
    return exit_code(ExitStatus::ok);
}

}  // namespace culina::cli
