#include "util/hex.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gputravel {
namespace {

using ::testing::HasSubstr;

TEST(HexTest, EncodesLowercase) {
  std::vector<uint8_t> b = {0x00, 0x0f, 0xa5, 0xff};
  EXPECT_EQ(HexEncode(b), "000fa5ff");
  EXPECT_EQ(HexEncode(absl::Span<const uint8_t>()), "");
  EXPECT_EQ(HexEncode(std::string("\x00\x0f\xa5\xff", 4)), "000fa5ff");
  EXPECT_EQ(HexEncode(std::string()), "");
}

TEST(HexTest, DecodesBothCases) {
  auto b = HexDecodeExact("00aBcDeF", 4);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<uint8_t>{0x00, 0xab, 0xcd, 0xef}));
  auto s = HexDecode("00aBcDeF");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, std::string("\x00\xab\xcd\xef", 4));
}

TEST(HexTest, RoundTrips) {
  std::vector<uint8_t> b(48);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 7);
  auto back = HexDecodeExact(HexEncode(b), 48);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, b);
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  EXPECT_EQ(*HexDecode(HexEncode(all)), all);
}

TEST(HexTest, RefusesWrongLength) {
  auto b = HexDecodeExact("abc", 2);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()),
              HasSubstr("expected 4 hex characters (2 bytes), got 3"));
  auto odd = HexDecode("abc");
  ASSERT_FALSE(odd.ok());
  EXPECT_THAT(std::string(odd.status().message()), HasSubstr("odd number of hex characters (3)"));
}

TEST(HexTest, RefusesNonHexCharacterNamingPosition) {
  auto b = HexDecodeExact("00g0", 2);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()),
              HasSubstr("invalid hex character 'g' at position 2"));
  EXPECT_FALSE(HexDecodeExact("0x00", 2).ok());
  EXPECT_FALSE(HexDecode("0x00").ok());
  EXPECT_FALSE(HexDecode("00 0").ok());
}

}  // namespace
}  // namespace gputravel
