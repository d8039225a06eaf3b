#include "fetch/curl_library.h"

#include <dlfcn.h>

#include "fetch/fetch_error.h"

namespace culina::fetch::curl {
namespace {

FetchError local_error(const std::string& message) { return FetchError(FetchError::Kind::local, message); }

template <typename Function>
void bind(void* module, const char* name, Function& target) {
    void* symbol = ::dlsym(module, name);
    if (symbol == nullptr) {
        throw local_error(std::string("libcurl.so.4 has no symbol ") + name +
                          ": the installed libcurl is too old or broken; install libcurl 7.32 or newer "
                          "(Debian/Ubuntu: libcurl4, RHEL: libcurl)");
    }
    target = reinterpret_cast<Function>(symbol);
}

Library load() {
    // RTLD_GLOBAL is not needed: nothing else resolves symbols against libcurl.
    void* module = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (module == nullptr) {
        const char* reason = ::dlerror();
        throw local_error(std::string("cannot load libcurl.so.4 (") + (reason ? reason : "unknown reason") +
                          "): downloading a prebuilt wheel needs libcurl; install it (Debian/Ubuntu: "
                          "apt-get install libcurl4, RHEL: dnf install libcurl) or build locally "
                          "(the VARIANT setting = source)");
    }
    Library library{};
    bind(module, "curl_global_init", library.global_init);
    bind(module, "curl_easy_init", library.easy_init);
    bind(module, "curl_easy_setopt", library.easy_setopt);
    bind(module, "curl_easy_perform", library.easy_perform);
    bind(module, "curl_easy_getinfo", library.easy_getinfo);
    bind(module, "curl_easy_cleanup", library.easy_cleanup);
    bind(module, "curl_easy_strerror", library.easy_strerror);
    bind(module, "curl_version", library.version);
    const int code = library.global_init(GLOBAL_DEFAULT);
    if (code != OK) {
        throw local_error(std::string("curl_global_init failed: ") + library.easy_strerror(code));
    }
    return library;
}

}  // namespace

const Library& library() {
    static const Library loaded = load();
    return loaded;
}

Easy::Easy() : library_(library()), handle_(library_.easy_init()) {
    if (handle_ == nullptr) throw local_error("curl_easy_init failed (out of memory?)");
}

Easy::~Easy() { library_.easy_cleanup(handle_); }

void Easy::check(int code, Option option) const {
    if (code != OK) {
        throw local_error("libcurl rejected option " + std::to_string(option) + ": " + library_.easy_strerror(code));
    }
}

void Easy::set(Option option, long value) { check(library_.easy_setopt(handle_, option, value), option); }
void Easy::set(Option option, const char* value) { check(library_.easy_setopt(handle_, option, value), option); }
void Easy::set(Option option, void* value) { check(library_.easy_setopt(handle_, option, value), option); }
void Easy::set(Option option, WriteCallback value) { check(library_.easy_setopt(handle_, option, value), option); }
void Easy::set(Option option, XferInfoCallback value) {
    check(library_.easy_setopt(handle_, option, value), option);
}

long Easy::response_code() const {
    long code = 0;
    library_.easy_getinfo(handle_, INFO_RESPONSE_CODE, &code);
    return code;
}

std::string Easy::redirect_url() const {
    const char* url = nullptr;
    library_.easy_getinfo(handle_, INFO_REDIRECT_URL, &url);
    return url != nullptr ? url : "";
}

}  // namespace culina::fetch::curl
