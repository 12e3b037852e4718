#include "cli/progress.h"

#include <cstdio>
#include <cstdlib>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(FormatBytes, Units) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.0 KiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(256ull << 20), "256.0 MiB");
  EXPECT_EQ(FormatBytes((3ull << 30) + (200ull << 20)), "3.2 GiB");
  EXPECT_EQ(FormatBytes(1ull << 40), "1.0 TiB");
  // Never "1024.0 KiB".
  EXPECT_EQ(FormatBytes((1ull << 20) - 1), "1.0 MiB");
  EXPECT_EQ(FormatBytes(std::numeric_limits<uint64_t>::max()), "16.0 EiB");
}

TEST(FormatRate, Values) {
  EXPECT_EQ(FormatRate(80.2 * (1 << 20)), "80.2 MiB/s");
  EXPECT_EQ(FormatRate(0), "0 B/s");
  EXPECT_EQ(FormatRate(-1), "-");
  EXPECT_EQ(FormatRate(std::nan("")), "-");
  EXPECT_EQ(FormatRate(std::numeric_limits<double>::infinity()), "-");
}

TEST(FormatPercent, Clamps) {
  EXPECT_EQ(FormatPercent(0.452), "45.2%");
  EXPECT_EQ(FormatPercent(-3), "0.0%");
  EXPECT_EQ(FormatPercent(7), "100.0%");
  EXPECT_EQ(FormatPercent(std::nan("")), "0.0%");
}

TEST(RenderProgressBar, HalfWithRate) {
  std::string s = RenderProgressBar(0.5, 60, "trip 3", 80.2 * (1 << 20));
  EXPECT_EQ(s.size(), 60u) << s;
  EXPECT_EQ(s.rfind("trip 3 [", 0), 0u) << s;
  EXPECT_NE(s.find("  50.0%"), std::string::npos) << s;
  EXPECT_NE(s.find("80.2 MiB/s"), std::string::npos) << s;
  size_t open = s.find('['), close = s.find(']');
  std::string bar = s.substr(open + 1, close - open - 1);
  size_t hashes = std::count(bar.begin(), bar.end(), '#');
  EXPECT_EQ(hashes, bar.size() / 2) << s;
  EXPECT_EQ(bar.find('-'), hashes) << s;
  for (char c : s) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "control character in " << s;
}

TEST(RenderProgressBar, EmptyFullAndClamped) {
  std::string empty = RenderProgressBar(0, 40, "x", -1);
  EXPECT_EQ(empty.find('#'), std::string::npos);
  EXPECT_NE(empty.find("0.0%"), std::string::npos);
  EXPECT_EQ(empty.find("/s"), std::string::npos);  // No rate.
  std::string full = RenderProgressBar(1, 40, "x", -1);
  EXPECT_EQ(full.find('-'), std::string::npos) << full;
  EXPECT_NE(full.find("100.0%"), std::string::npos);
  EXPECT_EQ(RenderProgressBar(5, 40, "x", -1), full);
  EXPECT_EQ(RenderProgressBar(std::nan(""), 40, "x", -1), empty);
  EXPECT_EQ(RenderProgressBar(-2, 40, "x", -1), empty);
}

TEST(RenderProgressBar, NarrowWidthShortensLabelNeverExceedsWidth) {
  std::string label = "campaign a-very-long-campaign-name 123.4 GiB of 999.9 GiB";
  for (int w = 0; w <= 120; ++w) {
    std::string s = RenderProgressBar(0.3, w, label, 1e6);
    EXPECT_LE(static_cast<int>(s.size()), w) << s;
  }
  std::string s = RenderProgressBar(0.3, 40, label, -1);
  EXPECT_EQ(s.size(), 40u) << s;
  EXPECT_NE(s.find("~ ["), std::string::npos) << s;  // Shortened label.
  EXPECT_NE(s.find("30.0%"), std::string::npos) << s;
  EXPECT_EQ(RenderProgressBar(0.3, 0, label, -1), "");
}

// Bars on a stream that is not a terminal: 80 columns; names are escaped.
TEST(ProgressDisplay, DrawsTripAndCampaignBarsAndClearsThem) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  ASSERT_NE(out, nullptr);
  {
    ProgressDisplay bars(out);
    ASSERT_TRUE(bars.enabled());
    bars.SetCampaign("camp\x1b", 512, 1024, 2, 1);
    bars.TripBytes(7, "hospital-a", 256, 1024);
    bars.Draw(true);
    std::fflush(out);
    std::string drawn(buf, len);
    EXPECT_NE(drawn.find("trip 7 hospital-a 256 B/1.0 KiB"), std::string::npos) << drawn;
    EXPECT_NE(drawn.find("25.0%"), std::string::npos) << drawn;
    EXPECT_NE(drawn.find("campaign camp\\x1b 512 B/1.0 KiB trips 2 ok 1 failed"),
              std::string::npos)
        << drawn;
    EXPECT_NE(drawn.find("50.0%"), std::string::npos) << drawn;
    EXPECT_EQ(drawn.find('\x1b'), std::string::npos) << "nothing to erase yet";
    EXPECT_NE(drawn.find('\n'), std::string::npos) << "two bars, two lines";
    bars.TripFinished();
    bars.Clear();
    std::fflush(out);
    std::string cleared(buf, len);
    EXPECT_EQ(cleared.substr(drawn.size()), "\r\x1b[K\x1b[1A\x1b[K");
  }
  std::fclose(out);
  std::free(buf);
  ProgressDisplay off(nullptr);
  EXPECT_FALSE(off.enabled());
  off.Draw(true);  // does nothing
}

}  // namespace
}  // namespace gputravel
