#include "keyxfer/secret_bytes.h"

#include <cstdlib>
#include <new>
#include <utility>

#include "gtest/gtest.h"

// The test binary's global operator delete looks at one watched block as it
// is released: whether every byte was already zero. That is the only way to
// see what a released key's memory held without reading freed memory.
namespace {
const void* g_watched = nullptr;
size_t g_watched_size = 0;
bool g_released = false;
bool g_was_zero = false;

void Inspect(void* p) {
  if (p == nullptr || p != g_watched) return;
  g_released = true;
  g_was_zero = true;
  const auto* b = static_cast<const volatile unsigned char*>(p);
  for (size_t i = 0; i < g_watched_size; ++i) g_was_zero = g_was_zero && b[i] == 0;
  g_watched = nullptr;
}
}  // namespace

// operator new is replaced too, so that every block operator delete frees
// came from malloc (AddressSanitizer checks that allocation and release pair).
void* operator new(std::size_t n) {
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return std::malloc(n == 0 ? 1 : n);
}
void operator delete(void* p) noexcept {
  Inspect(p);
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  Inspect(p);
  std::free(p);
}

namespace gputravel {
namespace {

void Watch(const SecretBytes& s) {
  g_watched = s.data();
  g_watched_size = s.size();
  g_released = false;
  g_was_zero = false;
}

TEST(SecretBytesTest, ClearZeroizesAndEmpties) {
  SecretBytes s = SecretBytes::FromString("0123456789abcdef");
  Watch(s);
  s.Clear();
  EXPECT_TRUE(s.empty());
  EXPECT_TRUE(g_released) << "Clear releases the bytes";
  EXPECT_TRUE(g_was_zero) << "the key was still in the memory Clear released";
}

TEST(SecretBytesTest, DestructionZeroizes) {
  {
    SecretBytes s = SecretBytes::FromString("fedcba9876543210fedcba9876543210");
    Watch(s);
  }
  EXPECT_TRUE(g_released);
  EXPECT_TRUE(g_was_zero) << "the key was still in the memory its destructor released";
  // A moved-to key is wiped when it goes, too.
  {
    SecretBytes a = SecretBytes::FromString("0123456789abcdef");
    SecretBytes b = std::move(a);
    Watch(b);
  }
  EXPECT_TRUE(g_released);
  EXPECT_TRUE(g_was_zero);
}

TEST(SecretBytesTest, MoveLeavesSourceEmpty) {
  SecretBytes a = SecretBytes::FromString("key");
  SecretBytes b = std::move(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(b.size(), 3u);
}

// Assigning a key over another: the old key's memory is wiped as it is
// released, the target holds the new key, and the source is left empty.
TEST(SecretBytesTest, MoveAssignOverAKeyWipesTheOldOne) {
  SecretBytes old_key = SecretBytes::FromString("old-key-0123456789abcdef");
  SecretBytes new_key = SecretBytes::FromString("new-key-fedcba9876543210");
  Watch(old_key);
  old_key = std::move(new_key);
  EXPECT_TRUE(g_released) << "the old key's memory was not released on assignment";
  EXPECT_TRUE(g_was_zero) << "the old key was still in the memory assignment released";
  EXPECT_TRUE(old_key.Equals(SecretBytes::FromString("new-key-fedcba9876543210")));
  EXPECT_TRUE(new_key.empty());
  // The moved-in key is wiped when it goes, too.
  Watch(old_key);
  old_key.Clear();
  EXPECT_TRUE(g_released);
  EXPECT_TRUE(g_was_zero);
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
