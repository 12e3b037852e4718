#include "keyxfer/cc_channel.h"

#include "gtest/gtest.h"
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
