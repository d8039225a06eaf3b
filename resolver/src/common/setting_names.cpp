#include "common/setting_names.h"

#include "common/text.h"

namespace culina {

std::string SettingNames::caller() const {
    std::string name = lowercase(prefix.substr(0, prefix.size() - 1));
    for (char& c : name) {
        if (c == '_') c = '-';
    }
    return name;
}

EnvLookup process_environment() {
    return [](const std::string& name) { return get_env(name.c_str()); };
}

bool is_valid_env_prefix(const std::string& prefix) {
    if (prefix.size() < 2 || prefix.front() < 'A' || prefix.front() > 'Z' || prefix.back() != '_') return false;
    for (const char c : prefix) {
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
}

}  // namespace culina
