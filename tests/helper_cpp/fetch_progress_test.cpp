#include <gtest/gtest.h>

#include <sstream>
#include <thread>

#include "fetch/progress.h"

namespace culina::fetch {
namespace {

TEST(Progress, FormatsBytes) {
    EXPECT_EQ(format_bytes(0), "0 B");
    EXPECT_EQ(format_bytes(1023), "1023 B");
    EXPECT_EQ(format_bytes(1536), "1.5 KiB");
    EXPECT_EQ(format_bytes(256ull << 20), "256.0 MiB");
    EXPECT_EQ(format_bytes(3ull << 30), "3.00 GiB");
}

TEST(Progress, FormatsDurations) {
    EXPECT_EQ(format_duration(7.4), "7s");
    EXPECT_EQ(format_duration(125), "2m05s");
    EXPECT_EQ(format_duration(3720), "1h02m");
    EXPECT_EQ(format_duration(-3), "0s");
}

TEST(Progress, LineHasSizeRateAndEta) {
    EXPECT_EQ(format_progress(128ull << 20, 256ull << 20, 64.0 * (1 << 20)), "128.0 MiB / 256.0 MiB (50%), 64.0 MiB/s, ETA 2s");
    EXPECT_EQ(format_progress(0, 1000, 0), "0 B / 1000 B (0%)");
    EXPECT_EQ(format_progress(1000, 1000, 500), "1000 B / 1000 B (100%), 500 B/s");
}

TEST(Progress, PlainLinesAreThrottledAndSummaryIsWritten) {
    std::ostringstream out;
    Progress progress(out, false, 3600, "culina: x.whl", 1000);
    progress.update(10, 10);
    progress.update(20, 20);
    EXPECT_EQ(out.str(), "") << "no line before the interval has passed";
    progress.finish(1000);
    EXPECT_EQ(out.str().rfind("culina: x.whl: transferred 1000 B in ", 0), 0u) << out.str();
}

TEST(Progress, PlainLinesAppearOncePerInterval) {
    std::ostringstream out;
    Progress progress(out, false, 0, "culina: x.whl", 1000);
    progress.update(500, 500);
    EXPECT_NE(out.str().find("culina: x.whl: 500 B / 1000 B (50%)"), std::string::npos) << out.str();
    EXPECT_EQ(out.str().find('\r'), std::string::npos);
}

TEST(Progress, TerminalRedrawsOneLineAndEndsIt) {
    std::ostringstream out;
    Progress progress(out, true, 0, "culina: x.whl", 1000);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    progress.update(500, 500);
    EXPECT_EQ(out.str().rfind("\r\033[K", 0), 0u);
    EXPECT_EQ(out.str().find('\n'), std::string::npos);
    progress.interrupt();
    EXPECT_EQ(out.str().back(), '\n');
}

}  // namespace
}  // namespace culina::fetch
