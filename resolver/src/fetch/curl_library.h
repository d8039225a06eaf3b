// libcurl, opened at run time from libcurl.so.4 so that the helper builds without curl's headers
// (stock CUDA images have the library but not the -dev package). Only the handful of functions
// and constants the fetch uses are declared here; they are part of libcurl's stable ABI.
#pragma once

#include <cstdint>
#include <string>

namespace culina::fetch::curl {

using Handle = void;      // CURL
using OffT = std::int64_t;  // curl_off_t on LP64 Linux

// CURLoption values: type base (long 0, object pointer 10000, function pointer 20000,
// curl_off_t 30000) plus the option number.
enum Option : int {
    OPT_WRITEDATA = 10001,
    OPT_URL = 10002,
    OPT_RANGE = 10007,
    OPT_ERRORBUFFER = 10010,
    OPT_WRITEFUNCTION = 20011,
    OPT_USERAGENT = 10018,
    OPT_HEADERDATA = 10029,
    OPT_NOPROGRESS = 43,
    OPT_XFERINFODATA = 10057,
    OPT_CAINFO = 10065,
    OPT_CONNECTTIMEOUT = 78,
    OPT_HEADERFUNCTION = 20079,
    OPT_BUFFERSIZE = 98,
    OPT_NOSIGNAL = 99,
    OPT_XFERINFOFUNCTION = 20219,
};

// CURLINFO values: type base (string 0x100000, long 0x200000) plus the info number.
enum Info : int {
    INFO_RESPONSE_CODE = 0x200000 + 2,
    INFO_REDIRECT_URL = 0x100000 + 31,
};

// CURLcode values the fetch tells apart.
enum Code : int {
    OK = 0,
    UNSUPPORTED_PROTOCOL = 1,
    URL_MALFORMAT = 3,
    COULDNT_RESOLVE_PROXY = 5,
    COULDNT_RESOLVE_HOST = 6,
    COULDNT_CONNECT = 7,
    HTTP2 = 16,
    PARTIAL_FILE = 18,
    WRITE_ERROR = 23,
    OPERATION_TIMEDOUT = 28,
    SSL_CONNECT_ERROR = 35,
    ABORTED_BY_CALLBACK = 42,
    GOT_NOTHING = 52,
    SEND_ERROR = 55,
    RECV_ERROR = 56,
    PEER_FAILED_VERIFICATION = 60,
    SSL_CACERT_BADFILE = 77,
    HTTP2_STREAM = 92,
};

constexpr long GLOBAL_DEFAULT = 3;  // CURL_GLOBAL_SSL | CURL_GLOBAL_WIN32
constexpr std::size_t ERROR_SIZE = 256;  // CURL_ERROR_SIZE

using WriteCallback = std::size_t (*)(char* data, std::size_t size, std::size_t count, void* user);
using XferInfoCallback = int (*)(void* user, OffT download_total, OffT download_now, OffT upload_total,
                                 OffT upload_now);

struct Library {
    int (*global_init)(long flags);
    Handle* (*easy_init)();
    int (*easy_setopt)(Handle*, int option, ...);
    int (*easy_perform)(Handle*);
    int (*easy_getinfo)(Handle*, int info, ...);
    void (*easy_cleanup)(Handle*);
    const char* (*easy_strerror)(int code);
    const char* (*version)();
};

// Loads libcurl.so.4 once (and runs curl_global_init); throws FetchError(local) naming the
// library and the package to install when it is missing or lacks a symbol.
const Library& library();

// Owns one easy handle.
class Easy {
public:
    Easy();
    ~Easy();
    Easy(const Easy&) = delete;
    Easy& operator=(const Easy&) = delete;

    Handle* get() const { return handle_; }
    // Each setter throws FetchError(local) when libcurl rejects the option.
    void set(Option option, long value);
    void set(Option option, const char* value);
    void set(Option option, void* value);
    void set(Option option, WriteCallback value);
    void set(Option option, XferInfoCallback value);
    long response_code() const;
    // Empty when the response carried no Location.
    std::string redirect_url() const;

private:
    void check(int code, Option option) const;

    const Library& library_;
    Handle* handle_;
};

}  // namespace culina::fetch::curl
