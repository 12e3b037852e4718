#include "keyxfer/aes_gcm.h"

#include "gtest/gtest.h"
#include "keyxfer/random.h"

namespace gputravel {
namespace {

SecretBytes RandomKey() {
  SecretBytes k(32);
  RandomBytes(k.data(), k.size());
  return k;
}

TEST(AesGcmTest, RoundTrip) {
  auto g = AesGcm::Create(RandomKey());
  ASSERT_TRUE(g.ok());
  uint8_t iv[12] = {1};
  auto sealed = (*g)->Seal(iv, "aad", "hello world");
  ASSERT_TRUE(sealed.ok());
  EXPECT_NE(sealed->substr(0, 11), "hello world");
  auto opened = (*g)->Open(iv, "aad", *sealed);
  ASSERT_TRUE(opened.ok());
  EXPECT_EQ(*opened, "hello world");
}

TEST(AesGcmTest, WrongKeyRefused) {
  auto a = AesGcm::Create(RandomKey());
  auto b = AesGcm::Create(RandomKey());
  uint8_t iv[12] = {0};
  auto sealed = (*a)->Seal(iv, "", "secret");
  auto opened = (*b)->Open(iv, "", *sealed);
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kDataLoss);
}

TEST(AesGcmTest, WrongAssociatedDataRefused) {
  auto g = AesGcm::Create(RandomKey());
  uint8_t iv[12] = {0};
  auto sealed = (*g)->Seal(iv, "trip=1", "secret");
  EXPECT_EQ((*g)->Open(iv, "trip=2", *sealed).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(AesGcmTest, TamperedCiphertextRefusedAndOutputZeroized) {
  auto g = AesGcm::Create(RandomKey());
  uint8_t iv[12] = {0};
  std::string pt(64, 'x');
  uint8_t ct[64], tag[16], out[64];
  ASSERT_TRUE((*g)->Encrypt(iv, nullptr, 0, reinterpret_cast<const uint8_t*>(pt.data()),
                            64, ct, tag).ok());
  ct[5] ^= 1;
  EXPECT_FALSE((*g)->Decrypt(iv, nullptr, 0, ct, 64, tag, out).ok());
  for (auto b : out) EXPECT_EQ(b, 0);
}

TEST(AesGcmTest, RejectsShortKey) {
  EXPECT_FALSE(AesGcm::Create(SecretBytes(16)).ok());
}

TEST(AesGcmTest, MatchesKnownAnswer) {
  // NIST GCM test vector (gcmEncryptExtIV256, Count 0 with empty PT/AAD):
  // key = 0^32, IV = 0^12 -> tag 530f8afbc74536b9a963b4f1c4cb738b.
  auto g = AesGcm::Create(SecretBytes(32));
  uint8_t iv[12] = {0};
  auto sealed = (*g)->Seal(iv, "", "");
  ASSERT_TRUE(sealed.ok());
  const uint8_t want[16] = {0x53, 0x0f, 0x8a, 0xfb, 0xc7, 0x45, 0x36, 0xb9,
                            0xa9, 0x63, 0xb4, 0xf1, 0xc4, 0xcb, 0x73, 0x8b};
  EXPECT_EQ(*sealed, std::string(reinterpret_cast<const char*>(want), 16));
}

}  // namespace
}  // namespace gputravel
