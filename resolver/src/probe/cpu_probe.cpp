#include "probe/cpu_probe.h"

#include <sys/utsname.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "common/text.h"

#ifdef CULINA_HAVE_CPUINFO
#include <cpuinfo.h>
#endif

namespace culina {
namespace {

// Linux flag names -> the names the psABI levels use.
const std::map<std::string, std::string>& x86_flag_names() {
    static const std::map<std::string, std::string> names = {
        {"pni", "sse3"},         {"ssse3", "ssse3"},        {"sse4_1", "sse4.1"},      {"sse4_2", "sse4.2"},
        {"popcnt", "popcnt"},    {"cx16", "cx16"},          {"lahf_lm", "lahf"},       {"avx", "avx"},
        {"avx2", "avx2"},        {"bmi1", "bmi1"},          {"bmi2", "bmi2"},          {"f16c", "f16c"},
        {"fma", "fma"},          {"abm", "lzcnt"},          {"movbe", "movbe"},        {"xsave", "xsave"},
        {"avx512f", "avx512f"},  {"avx512bw", "avx512bw"},  {"avx512cd", "avx512cd"},  {"avx512dq", "avx512dq"},
        {"avx512vl", "avx512vl"}, {"avx512_bf16", "avx512bf16"}, {"avx512_vnni", "avx512vnni"},
        {"amx_tile", "amx-tile"},
    };
    return names;
}

bool has_all(const std::vector<std::string>& features, std::initializer_list<const char*> wanted) {
    return std::all_of(wanted.begin(), wanted.end(), [&](const char* name) {
        return std::find(features.begin(), features.end(), name) != features.end();
    });
}

std::string machine_arch() {
    utsname names{};
    return uname(&names) == 0 ? names.machine : "";
}

std::string value_after_colon(const std::string& line) {
    const size_t colon = line.find(':');
    return colon == std::string::npos ? "" : trim(line.substr(colon + 1));
}

#ifdef CULINA_HAVE_CPUINFO
std::string vendor_name(enum cpuinfo_vendor vendor) {
    switch (vendor) {
        case cpuinfo_vendor_intel: return "GenuineIntel";
        case cpuinfo_vendor_amd: return "AuthenticAMD";
        case cpuinfo_vendor_arm: return "ARM";
        case cpuinfo_vendor_nvidia: return "NVIDIA";
        case cpuinfo_vendor_apple: return "Apple";
        case cpuinfo_vendor_qualcomm: return "Qualcomm";
        default: return "";
    }
}

#if CPUINFO_ARCH_X86 || CPUINFO_ARCH_X86_64
std::vector<std::string> cpuinfo_x86_features() {
    const std::pair<const char*, bool> table[] = {
        {"sse3", cpuinfo_has_x86_sse3()},          {"ssse3", cpuinfo_has_x86_ssse3()},
        {"sse4.1", cpuinfo_has_x86_sse4_1()},      {"sse4.2", cpuinfo_has_x86_sse4_2()},
        {"popcnt", cpuinfo_has_x86_popcnt()},      {"cx16", cpuinfo_has_x86_cmpxchg16b()},
        {"lahf", cpuinfo_has_x86_lahf_sahf()},     {"avx", cpuinfo_has_x86_avx()},
        {"avx2", cpuinfo_has_x86_avx2()},          {"bmi1", cpuinfo_has_x86_bmi()},
        {"bmi2", cpuinfo_has_x86_bmi2()},          {"f16c", cpuinfo_has_x86_f16c()},
        {"fma", cpuinfo_has_x86_fma3()},           {"lzcnt", cpuinfo_has_x86_lzcnt()},
        {"movbe", cpuinfo_has_x86_movbe()},        {"xsave", cpuinfo_has_x86_xsave()},
        {"avx512f", cpuinfo_has_x86_avx512f()},    {"avx512bw", cpuinfo_has_x86_avx512bw()},
        {"avx512cd", cpuinfo_has_x86_avx512cd()},  {"avx512dq", cpuinfo_has_x86_avx512dq()},
        {"avx512vl", cpuinfo_has_x86_avx512vl()},  {"avx512bf16", cpuinfo_has_x86_avx512bf16()},
        {"avx512vnni", cpuinfo_has_x86_avx512vnni()},
    };
    std::vector<std::string> features;
    for (const auto& [name, present] : table) {
        if (present) features.push_back(name);
    }
    return features;
}
#endif

// Fills vendor, model and (on x86) features; false when cpuinfo cannot initialise.
bool fill_from_cpuinfo(CpuInfo& cpu) {
    if (!cpuinfo_initialize()) return false;
    const cpuinfo_package* package = cpuinfo_get_package(0);
    const cpuinfo_core* core = cpuinfo_get_core(0);
    if (package) cpu.model = printable(trim(package->name), kForeignTextLimit);
    if (core) cpu.vendor = vendor_name(core->vendor);
#if CPUINFO_ARCH_X86 || CPUINFO_ARCH_X86_64
    cpu.features = cpuinfo_x86_features();
#endif
    cpu.source = "cpuinfo";
    return true;
}
#endif

}  // namespace

CpuInfo parse_proc_cpuinfo(const std::string& text, const std::string& arch) {
    CpuInfo cpu;
    cpu.arch = arch;
    cpu.source = "/proc/cpuinfo";
    const bool x86 = arch == "x86_64" || arch == "i686";
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        const std::string key = trim(line.substr(0, line.find(':')));
        const std::string value = value_after_colon(line);
        // /proc/cpuinfo is the kernel's, or in a container whatever a FUSE file (lxcfs) serves:
        // what is kept of it as text is made printable here. (x86 flags are kept only by name.)
        const std::string shown = printable(value, kForeignTextLimit);
        if (key == "vendor_id" && cpu.vendor.empty()) cpu.vendor = shown;
        if (key == "model name" && cpu.model.empty()) cpu.model = shown;
        if (key == "CPU implementer" && cpu.vendor.empty()) cpu.vendor = value == "0x41" ? "ARM" : shown;
        if (key == "CPU part" && cpu.model.empty()) cpu.model = "part " + shown;
        const bool flag_line = x86 ? key == "flags" : key == "Features";
        if (!flag_line || !cpu.features.empty()) continue;
        std::istringstream words(value);
        std::string word;
        while (words >> word) {
            if (!x86) {
                cpu.features.push_back(printable(word, kForeignTextLimit));
            } else if (auto named = x86_flag_names().find(word); named != x86_flag_names().end()) {
                cpu.features.push_back(named->second);
            }
        }
    }
    cpu.isa_level = x86 ? x86_isa_level(cpu.features) : arch == "aarch64" ? arm_isa_level(cpu.features) : "";
    return cpu;
}

std::string x86_isa_level(const std::vector<std::string>& features) {
    const bool v2 = has_all(features, {"cx16", "lahf", "popcnt", "sse3", "sse4.1", "sse4.2", "ssse3"});
    const bool v3 = v2 && has_all(features, {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave"});
    const bool v4 = v3 && has_all(features, {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"});
    return v4 ? "x86-64-v4" : v3 ? "x86-64-v3" : v2 ? "x86-64-v2" : "x86-64";
}

std::string arm_isa_level(const std::vector<std::string>& features) {
    if (has_all(features, {"sve2"})) return "armv9-a";
    if (has_all(features, {"atomics", "asimdrdm", "asimdhp", "dcpop"})) return "armv8.2-a";
    return "armv8-a";
}

CpuInfo probe_cpu() {
    const std::string arch = machine_arch();
    CpuInfo cpu = parse_proc_cpuinfo(read_text_file("/proc/cpuinfo").value_or(""), arch);
#ifdef CULINA_HAVE_CPUINFO
    CpuInfo from_library = cpu;
    if (fill_from_cpuinfo(from_library)) {
        if (from_library.features.empty()) from_library.features = cpu.features;
        if (from_library.model.empty()) from_library.model = cpu.model;
        if (from_library.vendor.empty()) from_library.vendor = cpu.vendor;
        from_library.isa_level = arch == "x86_64" ? x86_isa_level(from_library.features) : cpu.isa_level;
        return from_library;
    }
#endif
    return cpu;
}

}  // namespace culina
