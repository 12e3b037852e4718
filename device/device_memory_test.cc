#include "device/device_memory.h"

#include <algorithm>
#include <string>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

constexpr uint64_t kPage = kDevicePageBytes;

std::string Bytes(const DeviceBuffer& b, uint64_t off, size_t n) {
  std::string out;
  b.AppendTo(off, n, &out);
  return out;
}

TEST(DeviceBufferTest, StartsZeroedAndKeepsItsSize) {
  DeviceBuffer b(2 * kPage + 96);
  EXPECT_EQ(b.size(), 2 * kPage + 96);
  EXPECT_EQ(Bytes(b, 0, b.size()), std::string(b.size(), '\0'));
}

TEST(DeviceBufferTest, WritesAndReadsAcrossPageBoundaries) {
  DeviceBuffer b(2 * kPage + 96);
  const std::string s = std::string(100, 'x') + std::string(60, 'y');
  b.Write(kPage - 100, reinterpret_cast<const uint8_t*>(s.data()), s.size());
  EXPECT_EQ(Bytes(b, kPage - 100, s.size()), s);
  EXPECT_EQ(Bytes(b, kPage - 101, 1), std::string(1, '\0'));
  EXPECT_EQ(Bytes(b, kPage + 60, 1), std::string(1, '\0'));
  // Into the short last page, up to its end.
  const std::string t(96 + 32, 'z');
  b.Write(2 * kPage - 32, reinterpret_cast<const uint8_t*>(t.data()), t.size());
  EXPECT_EQ(Bytes(b, 2 * kPage - 32, t.size()), t);
  std::string out = "kept:";
  b.AppendTo(kPage - 100, 5, &out);
  EXPECT_EQ(out, "kept:xxxxx");
}

TEST(DeviceBufferTest, OnlyAFullAlignedPageIsWhole) {
  DeviceBuffer b(2 * kPage + kPage / 2);
  EXPECT_TRUE(b.IsWholePage(0, kPage));
  EXPECT_TRUE(b.IsWholePage(kPage, kPage));
  EXPECT_FALSE(b.IsWholePage(0, kPage - 32));    // part of a page
  EXPECT_FALSE(b.IsWholePage(32, kPage));        // not aligned to a page
  EXPECT_FALSE(b.IsWholePage(2 * kPage, kPage)); // the short last page
  EXPECT_FALSE(b.IsWholePage(3 * kPage, kPage)); // past the end
  EXPECT_FALSE(DeviceBuffer(kPage / 2).IsWholePage(0, kPage));
}

TEST(DeviceBufferTest, ExchangePutsThePageInPlaceAndReturnsTheOldOne) {
  DeviceBuffer b(2 * kPage);
  const std::string old(kPage, 'o');
  b.Write(kPage, reinterpret_cast<const uint8_t*>(old.data()), old.size());
  DevicePage fresh(kPage);
  std::fill(fresh.data(), fresh.data() + kPage, 'n');
  const uint8_t* fresh_bytes = fresh.data();
  DevicePage back = b.Exchange(kPage, std::move(fresh));
  EXPECT_EQ(Bytes(b, kPage, kPage), std::string(kPage, 'n'));
  EXPECT_EQ(Bytes(b, 0, kPage), std::string(kPage, '\0'));  // the other page
  ASSERT_EQ(back.size(), kPage);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(back.data()), kPage), old);
  // No copy: the buffer now holds the very block it was given.
  EXPECT_EQ(Bytes(b, kPage, 1), std::string(1, 'n'));
  EXPECT_NE(back.data(), fresh_bytes);
}

TEST(DeviceBufferTest, ZeroAndWipeClearEveryPage) {
  DeviceBuffer b(kPage + 64);
  const std::string s(kPage + 64, 's');
  b.Write(0, reinterpret_cast<const uint8_t*>(s.data()), s.size());
  b.Zero();
  EXPECT_EQ(Bytes(b, 0, b.size()), std::string(b.size(), '\0'));
  b.Write(0, reinterpret_cast<const uint8_t*>(s.data()), s.size());
  b.Wipe();
  EXPECT_EQ(Bytes(b, 0, b.size()), std::string(b.size(), '\0'));
}

TEST(DevicePageTest, MoveLeavesAnEmptyPageAndWipesWhatItOverwrites) {
  DevicePage a(64);
  std::fill(a.data(), a.data() + 64, 'a');
  DevicePage b(std::move(a));
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): the moved-from state
  EXPECT_EQ(a.data(), nullptr);
  a.Wipe();  // harmless on an empty page
  ASSERT_EQ(b.size(), 64u);
  EXPECT_EQ(b.data()[63], 'a');
  DevicePage c(32);
  c = std::move(b);
  EXPECT_EQ(c.size(), 64u);
  EXPECT_EQ(c.data()[0], 'a');
}

}  // namespace
}  // namespace gputravel
