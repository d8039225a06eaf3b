// The constants in fetch/curl_library.h are declared by hand so that the helper builds without
// curl's headers. Where the headers are installed (libcurl4-openssl-dev), check them against it.
#include <gtest/gtest.h>

#include "fetch/curl_library.h"

#if __has_include(<curl/curl.h>)
#include <curl/curl.h>
#define CULINA_HAVE_CURL_HEADERS 1
#endif

namespace culina::fetch {
namespace {

#ifdef CULINA_HAVE_CURL_HEADERS
TEST(CurlAbi, OptionsMatchTheHeaders) {
    EXPECT_EQ(curl::OPT_WRITEDATA, CURLOPT_WRITEDATA);
    EXPECT_EQ(curl::OPT_URL, CURLOPT_URL);
    EXPECT_EQ(curl::OPT_RANGE, CURLOPT_RANGE);
    EXPECT_EQ(curl::OPT_ERRORBUFFER, CURLOPT_ERRORBUFFER);
    EXPECT_EQ(curl::OPT_WRITEFUNCTION, CURLOPT_WRITEFUNCTION);
    EXPECT_EQ(curl::OPT_USERAGENT, CURLOPT_USERAGENT);
    EXPECT_EQ(curl::OPT_HEADERDATA, CURLOPT_HEADERDATA);
    EXPECT_EQ(curl::OPT_NOPROGRESS, CURLOPT_NOPROGRESS);
    EXPECT_EQ(curl::OPT_XFERINFODATA, CURLOPT_XFERINFODATA);
    EXPECT_EQ(curl::OPT_CAINFO, CURLOPT_CAINFO);
    EXPECT_EQ(curl::OPT_CONNECTTIMEOUT, CURLOPT_CONNECTTIMEOUT);
    EXPECT_EQ(curl::OPT_HEADERFUNCTION, CURLOPT_HEADERFUNCTION);
    EXPECT_EQ(curl::OPT_BUFFERSIZE, CURLOPT_BUFFERSIZE);
    EXPECT_EQ(curl::OPT_NOSIGNAL, CURLOPT_NOSIGNAL);
    EXPECT_EQ(curl::OPT_XFERINFOFUNCTION, CURLOPT_XFERINFOFUNCTION);
}

TEST(CurlAbi, InfoCodesAndConstantsMatchTheHeaders) {
    EXPECT_EQ(curl::INFO_RESPONSE_CODE, CURLINFO_RESPONSE_CODE);
    EXPECT_EQ(curl::INFO_REDIRECT_URL, CURLINFO_REDIRECT_URL);
    EXPECT_EQ(curl::OK, CURLE_OK);
    EXPECT_EQ(curl::UNSUPPORTED_PROTOCOL, CURLE_UNSUPPORTED_PROTOCOL);
    EXPECT_EQ(curl::URL_MALFORMAT, CURLE_URL_MALFORMAT);
    EXPECT_EQ(curl::COULDNT_RESOLVE_PROXY, CURLE_COULDNT_RESOLVE_PROXY);
    EXPECT_EQ(curl::COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_HOST);
    EXPECT_EQ(curl::COULDNT_CONNECT, CURLE_COULDNT_CONNECT);
    EXPECT_EQ(curl::HTTP2, CURLE_HTTP2);
    EXPECT_EQ(curl::PARTIAL_FILE, CURLE_PARTIAL_FILE);
    EXPECT_EQ(curl::WRITE_ERROR, CURLE_WRITE_ERROR);
    EXPECT_EQ(curl::OPERATION_TIMEDOUT, CURLE_OPERATION_TIMEDOUT);
    EXPECT_EQ(curl::SSL_CONNECT_ERROR, CURLE_SSL_CONNECT_ERROR);
    EXPECT_EQ(curl::ABORTED_BY_CALLBACK, CURLE_ABORTED_BY_CALLBACK);
    EXPECT_EQ(curl::GOT_NOTHING, CURLE_GOT_NOTHING);
    EXPECT_EQ(curl::SEND_ERROR, CURLE_SEND_ERROR);
    EXPECT_EQ(curl::RECV_ERROR, CURLE_RECV_ERROR);
    EXPECT_EQ(curl::PEER_FAILED_VERIFICATION, CURLE_PEER_FAILED_VERIFICATION);
    EXPECT_EQ(curl::SSL_CACERT_BADFILE, CURLE_SSL_CACERT_BADFILE);
    EXPECT_EQ(curl::HTTP2_STREAM, CURLE_HTTP2_STREAM);
    EXPECT_EQ(curl::GLOBAL_DEFAULT, CURL_GLOBAL_DEFAULT);
    EXPECT_EQ(curl::ERROR_SIZE, static_cast<std::size_t>(CURL_ERROR_SIZE));
    EXPECT_EQ(sizeof(curl::OffT), sizeof(curl_off_t));
}
#endif

TEST(CurlAbi, LibraryLoadsAtRunTime) {
    const curl::Library& library = curl::library();
    ASSERT_NE(library.version, nullptr);
    EXPECT_EQ(std::string(library.version()).rfind("libcurl/", 0), 0u) << library.version();
    curl::Easy easy;
    easy.set(curl::OPT_URL, "https://127.0.0.1/");
}

}  // namespace
}  // namespace culina::fetch
