// printable: what the helper makes of text it did not write (a driver's GPU name, a server's
// error body) before it reaches a log line, a text table or JSON.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "host/host_json.h"

namespace culina {
namespace {

using namespace std::string_literals;  // for texts holding a NUL

const std::string kReplacement = "\xef\xbf\xbd";  // U+FFFD

TEST(Printable, KeepsPrintableAsciiAndUtf8) {
    EXPECT_EQ(printable("NVIDIA H200 (80 GB) \\ 'x' \"y\" ~"), "NVIDIA H200 (80 GB) \\ 'x' \"y\" ~");
    const std::string utf8 = "Grafikkarte \xc3\xbc \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbd";  // ü € 😀 U+FFFD
    EXPECT_EQ(printable(utf8), utf8);
    EXPECT_EQ(printable(""), "");
}

TEST(Printable, EscapesControlCharactersVisibly) {
    EXPECT_EQ(printable("a\nb\rc\td"), "a\\x0ab\\x0dc\\x09d");
    EXPECT_EQ(printable("\x1b[2J\x7f"), "\\x1b[2J\\x7f");
    EXPECT_EQ(printable("nul\0here"s), "nul\\x00here");
    // C1: NEL, and CSI, which some terminals obey like ESC [.
    EXPECT_EQ(printable("\xc2\x85\xc2\x9b"), "\\xc2\\x85\\xc2\\x9b");
    EXPECT_EQ(printable("\xc2\xa0"), "\xc2\xa0");  // U+00A0, the first character after C1, is kept
    // Line and paragraph separators, and right-to-left override, left-to-right mark, isolates.
    EXPECT_EQ(printable("\xe2\x80\xa8\xe2\x80\xa9"), "\\xe2\\x80\\xa8\\xe2\\x80\\xa9");
    EXPECT_EQ(printable("\xe2\x80\xae\xe2\x80\x8e\xe2\x81\xa6"), "\\xe2\\x80\\xae\\xe2\\x80\\x8e\\xe2\\x81\\xa6");
    EXPECT_EQ(printable("\xe2\x80\x94"), "\xe2\x80\x94");  // an em dash is kept
}

TEST(Printable, ReplacesBytesThatAreNotUtf8) {
    EXPECT_EQ(printable("Evil\xff"), "Evil" + kReplacement);
    EXPECT_EQ(printable("\xc3("), kReplacement + "(");                          // lead byte, no continuation
    EXPECT_EQ(printable("\x80"), kReplacement);                                 // lone continuation
    EXPECT_EQ(printable("\xe2\x82"), kReplacement + kReplacement);              // cut short at the end
    EXPECT_EQ(printable("\xc0\xaf"), kReplacement + kReplacement);              // overlong "/"
    EXPECT_EQ(printable("\xed\xa0\x80"), kReplacement + kReplacement + kReplacement);  // a UTF-16 surrogate
    EXPECT_EQ(printable("\xf4\x90\x80\x80"), std::string() + kReplacement + kReplacement + kReplacement + kReplacement);  // past U+10FFFF
}

TEST(Printable, CutsAtTheLimitWithAMarker) {
    EXPECT_EQ(printable(std::string(256, 'a'), 256), std::string(256, 'a'));
    EXPECT_EQ(printable(std::string(1 << 20, 'a'), 256), std::string(256, 'a') + kCutMarker);
    // Never inside an escape or a character: what does not fit whole is left out.
    EXPECT_EQ(printable(std::string(254, 'a') + "\n", 256), std::string(254, 'a') + kCutMarker);
    EXPECT_EQ(printable(std::string(255, 'a') + "\xe2\x82\xac", 256), std::string(255, 'a') + kCutMarker);
    // The limit counts what is shown: 100 newlines are 400 bytes of escapes.
    EXPECT_EQ(printable(std::string(100, '\n'), 256).size(), 256 + std::string(kCutMarker).size());
}

TEST(Printable, IsStableWhenAppliedTwice) {
    const std::string hostile = "Evil\xff\xc3(GPU\ngpu 7 12 0 forged\x1b[2J\t\x7f end \xe2\x80\xae";
    EXPECT_EQ(printable(printable(hostile)), printable(hostile));
}

TEST(Printable, AlwaysGivesTextThatJsonCanHold) {
    const std::string hostile = "\xff\xfe\xc3\x28\xe2\x82\x1b\n\xf0\x9f\x98";
    EXPECT_NO_THROW(nlohmann::json(printable(hostile)).dump());
}

// The second line of defence: a byte that is not UTF-8 reaching a host document is replaced, not
// an exception (nlohmann's default) that ends the helper.
TEST(HostJsonText, ReplacesBytesThatAreNotUtf8) {
    const nlohmann::json document = {{"name", "Evil\xff"}};
    EXPECT_THROW(document.dump(), nlohmann::json::type_error);
    EXPECT_EQ(nlohmann::json::parse(host_json_text(document))["name"], "Evil" + kReplacement);
}

}  // namespace
}  // namespace culina
