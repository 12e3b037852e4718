#include "keyxfer/cc_channel.h"

#include "gtest/gtest.h"
#include "keyxfer/aes_gcm.h"
#include "keyxfer/random.h"

namespace gputravel {
namespace {

ChannelMaterial RandomMaterial() {
  ChannelMaterial m;
  m.key = SecretBytes(32);
  RandomBytes(m.key.data(), 32);
  RandomBytes(m.iv_mask.data(), m.iv_mask.size());
  m.channel_counter = 7;
  return m;
}

TEST(ChannelIvTest, LayoutIsCounterWordsXorMask) {
  IvMask zero{};
  auto iv = ChannelIv(0x01020304, 0x0A0B0C0D11121314ull, zero);
  // word 0 little-endian message counter, words 1-2 the channel counter.
  EXPECT_EQ(iv[0], 0x04);
  EXPECT_EQ(iv[3], 0x01);
  EXPECT_EQ(iv[4], 0x14);
  EXPECT_EQ(iv[7], 0x11);
  EXPECT_EQ(iv[8], 0x0D);
  EXPECT_EQ(iv[11], 0x0A);
  IvMask mask{};
  mask[0] = 0xFF;
  EXPECT_EQ(ChannelIv(0x01020304, 0, mask)[0], 0x04 ^ 0xFF);
}

// Each of the twelve IV bytes is XORed with its own mask byte.
TEST(ChannelIvTest, EveryByteTakesItsOwnMaskByte) {
  IvMask mask{};
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = static_cast<uint8_t>(0x10 * (i + 1) + i);
  const uint32_t message = 0xA1B2C3D4u;
  const uint64_t channel = 0x0102030405060708ull;
  const uint8_t plain[12] = {0xD4, 0xC3, 0xB2, 0xA1, 0x08, 0x07,
                             0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
  auto iv = ChannelIv(message, channel, mask);
  for (size_t i = 0; i < iv.size(); ++i) {
    EXPECT_EQ(iv[i], plain[i] ^ mask[i]) << "byte " << i;
  }
}

// The channel cipher is AES-256-GCM under exactly that IV: a chunk it seals
// is what AES-GCM seals with the IV written out by hand, byte for byte and
// tag for tag, and a cipher at another channel counter or with another mask
// does not open it.
TEST(ChannelCipherTest, SealsUnderTheMaskedCounterIv) {
  ChannelMaterial m = RandomMaterial();
  m.channel_counter = 0x1122334455667788ull;
  const uint32_t counter = 0x00C0FFEEu;
  const std::string aad = "aad of the chunk";
  const std::string plain(96, 'p');
  auto channel = *ChannelCipher::Create(m);
  std::string ct(plain.size(), '\0');
  uint8_t tag[kGcmTagSize];
  ASSERT_TRUE(channel
                  ->Encrypt(counter, reinterpret_cast<const uint8_t*>(aad.data()), aad.size(),
                            reinterpret_cast<const uint8_t*>(plain.data()), plain.size(),
                            reinterpret_cast<uint8_t*>(&ct[0]), tag)
                  .ok());
  uint8_t iv[kGcmIvSize];
  for (int b = 0; b < 4; ++b) iv[b] = static_cast<uint8_t>(counter >> (8 * b));
  for (int b = 0; b < 8; ++b) iv[4 + b] = static_cast<uint8_t>(m.channel_counter >> (8 * b));
  for (size_t i = 0; i < kGcmIvSize; ++i) iv[i] ^= m.iv_mask[i];
  auto gcm = *AesGcm::Create(m.key);
  std::string want(plain.size(), '\0');
  uint8_t want_tag[kGcmTagSize];
  ASSERT_TRUE(gcm->Encrypt(iv, reinterpret_cast<const uint8_t*>(aad.data()), aad.size(),
                           reinterpret_cast<const uint8_t*>(plain.data()), plain.size(),
                           reinterpret_cast<uint8_t*>(&want[0]), want_tag)
                  .ok());
  EXPECT_EQ(ct, want);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(tag), kGcmTagSize),
            std::string(reinterpret_cast<char*>(want_tag), kGcmTagSize));

  auto open_with = [&](const ChannelMaterial& other) {
    auto c = *ChannelCipher::Create(other);
    std::string out(plain.size(), '\0');
    return c->Decrypt(counter, reinterpret_cast<const uint8_t*>(aad.data()), aad.size(),
                      reinterpret_cast<const uint8_t*>(ct.data()), ct.size(), tag,
                      reinterpret_cast<uint8_t*>(&out[0]));
  };
  EXPECT_TRUE(open_with(m).ok());
  ChannelMaterial next_space = m.Clone();
  ++next_space.channel_counter;
  EXPECT_FALSE(open_with(next_space).ok());
  for (int i : {0, 5, 11}) {  // a mask byte in each word
    ChannelMaterial other_mask = m.Clone();
    other_mask.iv_mask[i] ^= 0x01;
    EXPECT_FALSE(open_with(other_mask).ok()) << "mask byte " << i;
  }
}

TEST(ChannelIvTest, DistinctCountersGiveDistinctIvs) {
  IvMask mask{};
  RandomBytes(mask.data(), mask.size());
  EXPECT_NE(ChannelIv(1, 0, mask), ChannelIv(2, 0, mask));
  EXPECT_NE(ChannelIv(1, 0, mask), ChannelIv(1, 1, mask));
}

class SealedChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a2b_ = RandomMaterial();
    b2a_ = RandomMaterial();
    a_ = *SealedChannel::Create(a2b_, b2a_);
    b_ = *SealedChannel::Create(b2a_, a2b_);
  }
  ChannelMaterial a2b_, b2a_;
  std::unique_ptr<SealedChannel> a_, b_;
};

TEST_F(SealedChannelTest, InOrderMessagesOpen) {
  uint32_t c1 = 0, c2 = 0;
  auto m1 = a_->Seal("ad", "one", &c1);
  auto m2 = a_->Seal("ad", "two", &c2);
  EXPECT_EQ(c1, kFirstMessageCounter);
  EXPECT_EQ(c2, kFirstMessageCounter + 1);
  EXPECT_EQ(*b_->Open("ad", *m1), "one");
  EXPECT_EQ(*b_->Open("ad", *m2), "two");
}

TEST_F(SealedChannelTest, ReplayedMessageRefused) {
  auto m1 = a_->Seal("ad", "one", nullptr);
  ASSERT_TRUE(b_->Open("ad", *m1).ok());
  EXPECT_FALSE(b_->Open("ad", *m1).ok());
}

TEST_F(SealedChannelTest, ReorderedMessageRefusedAndChannelRecovers) {
  auto m1 = a_->Seal("ad", "one", nullptr);
  auto m2 = a_->Seal("ad", "two", nullptr);
  EXPECT_FALSE(b_->Open("ad", *m2).ok());  // m1 expected first
  EXPECT_EQ(*b_->Open("ad", *m1), "one");  // a forgery did not advance the counter
  EXPECT_EQ(*b_->Open("ad", *m2), "two");
}

// The last counter carries a message both ways; after it both ends refuse
// (ResourceExhausted), and nothing is ever sealed twice under one IV.
TEST_F(SealedChannelTest, LastCounterIsUsedThenTheChannelIsExhausted) {
  a_->SkipToCounterForTest(kLastMessageCounter - 1);
  b_->SkipToCounterForTest(kLastMessageCounter - 1);
  uint32_t c = 0;
  auto m1 = a_->Seal("ad", "next to last", &c);
  EXPECT_EQ(c, kLastMessageCounter - 1);
  auto m2 = a_->Seal("ad", "last", &c);
  ASSERT_TRUE(m2.ok());
  EXPECT_EQ(c, kLastMessageCounter);
  auto m3 = a_->Seal("ad", "one too many", &c);
  EXPECT_EQ(m3.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(*b_->Open("ad", *m1), "next to last");
  auto last = b_->Open("ad", *m2);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(*last, "last");
  auto again = b_->Open("ad", *m2);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(SealedChannelTest, WrongAssociatedDataRefused) {
  auto m1 = a_->Seal("session=1", "one", nullptr);
  EXPECT_FALSE(b_->Open("session=2", *m1).ok());
}

TEST(ChannelCipherTest, KeyFromBeforeRekeyRefused) {
  ChannelMaterial old_key = RandomMaterial();
  ChannelMaterial new_key = RandomMaterial();
  auto sender = *ChannelCipher::Create(old_key);
  auto receiver = *ChannelCipher::Create(new_key);
  uint8_t pt[64] = {1, 2, 3}, ct[64], tag[16], out[64];
  ASSERT_TRUE(sender->Encrypt(1, nullptr, 0, pt, 64, ct, tag).ok());
  EXPECT_FALSE(receiver->Decrypt(1, nullptr, 0, ct, 64, tag, out).ok());
}

TEST(ChannelCipherTest, WrongCounterRefused) {
  ChannelMaterial m = RandomMaterial();
  auto c = *ChannelCipher::Create(m);
  uint8_t pt[32] = {9}, ct[32], tag[16], out[32];
  ASSERT_TRUE(c->Encrypt(5, nullptr, 0, pt, 32, ct, tag).ok());
  EXPECT_FALSE(c->Decrypt(6, nullptr, 0, ct, 32, tag, out).ok());
  EXPECT_TRUE(c->Decrypt(5, nullptr, 0, ct, 32, tag, out).ok());
}

}  // namespace
}  // namespace gputravel
