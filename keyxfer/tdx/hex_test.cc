#include "keyxfer/tdx/hex.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gputravel::tdx {
namespace {

using ::testing::HasSubstr;

TEST(HexTest, EncodesLowercase) {
  std::vector<uint8_t> b = {0x00, 0x0f, 0xa5, 0xff};
  EXPECT_EQ(ToHex(b), "000fa5ff");
  EXPECT_EQ(ToHex({}), "");
}

TEST(HexTest, DecodesBothCases) {
  auto b = FromHex("00aBcDeF", 4);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<uint8_t>{0x00, 0xab, 0xcd, 0xef}));
}

TEST(HexTest, RoundTrips) {
  std::vector<uint8_t> b(48);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 7);
  auto back = FromHex(ToHex(b), 48);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, b);
}

TEST(HexTest, RefusesWrongLength) {
  auto b = FromHex("abc", 2);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()),
              HasSubstr("expected 4 hex characters (2 bytes), got 3"));
}

TEST(HexTest, RefusesNonHexCharacterNamingPosition) {
  auto b = FromHex("00g0", 2);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()),
              HasSubstr("invalid hex character 'g' at position 2"));
  EXPECT_FALSE(FromHex("0x00", 2).ok());
}

}  // namespace
}  // namespace gputravel::tdx
