#include "fetch/fetch_settings.h"

#include <sys/stat.h>

#include <filesystem>

#include "common/text.h"
#include "fetch/fetch_error.h"

namespace culina::fetch {
namespace {

bool non_empty(const std::optional<std::string>& value) { return value.has_value() && !value->empty(); }

}  // namespace

bool is_cache_dir_form(const std::string& value) {
    return value == "~" || starts_with(value, "~/") || std::filesystem::path(value).is_absolute();
}

std::string resolve_cache_root(const std::optional<std::string>& cache_dir, const SettingNames& names,
                               const EnvLookup& host_env) {
    std::filesystem::path root;
    const std::optional<std::string> home = host_env("HOME");
    const std::string variable = names.of("CACHE_DIR");
    if (non_empty(cache_dir)) {
        const std::string& value = *cache_dir;
        if (!is_cache_dir_form(value)) {
            throw configuration_error(variable + "='" + value +
                                      "' is not an absolute path: give one like /var/cache/" + names.caller() + " or ~/.cache/" + names.caller() + " "
                                      "(~ is your HOME; ~user and relative paths are not accepted)");
        }
        if (value == "~" || starts_with(value, "~/")) {
            if (!non_empty(home) || !std::filesystem::path(*home).is_absolute()) {
                throw configuration_error(variable + "='" + value +
                                          "' starts with ~ but HOME is not an absolute path: write the folder out in full");
            }
            root = std::filesystem::path(*home) / value.substr(std::min<std::size_t>(2, value.size()));
        } else {
            root = value;
        }
    } else if (const auto xdg = host_env("XDG_CACHE_HOME"); non_empty(xdg) && std::filesystem::path(*xdg).is_absolute()) {
        root = std::filesystem::path(*xdg) / names.caller();
    } else if (non_empty(home)) {
        root = std::filesystem::path(*home) / ".cache" / names.caller();
    } else {
        throw configuration_error("no cache directory: " + variable + ", XDG_CACHE_HOME and HOME are all unset; set " +
                                  variable + " to a writable folder");
    }
    std::string normal = root.lexically_normal().string();
    if (normal.size() > 1 && normal.back() == '/') normal.pop_back();
    return normal;
}

FetchSettings with_host_ca_bundle(FetchSettings settings, const EnvLookup& host_env) {
    if (settings.ca_bundle.empty()) {
        for (const char* name : {"SSL_CERT_FILE", "CURL_CA_BUNDLE"}) {
            const std::optional<std::string> value = host_env(name);
            if (!non_empty(value)) continue;
            struct stat info {};
            if (::stat(value->c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
                throw configuration_error(std::string(name) + "='" + *value +
                                          "' does not name a readable file: point it to a PEM file of trusted CA "
                                          "certificates, or unset it to use the system CA store");
            }
            settings.ca_bundle = *value;
            settings.ca_bundle_source = name;
            break;
        }
    }
    if (!settings.ca_bundle.empty()) {
        settings.notes.push_back("trusting the CA certificates in " + settings.ca_bundle + " (from " +
                                 settings.ca_bundle_source + ")");
    }
    return settings;
}

}  // namespace culina::fetch
