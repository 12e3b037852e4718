// The (a) replica on its zero-copy path: same counters, AAD and tag order as
// the writer (WindowDigest) for views and for copies, for any thread count,
// and views that wrap around the in-memory source's end.
#include "bench/stage_pipeline.h"

#include <stdlib.h>

#include <cstring>
#include <filesystem>

#include "bench/plaintext_source.h"
#include "device/h2d_writer.h"
#include "device/window_digest.h"
#include "keyxfer/device_session.h"
#include "gtest/gtest.h"
#include "keyxfer/random.h"

namespace gputravel {
namespace bench {
namespace {

ChannelMaterial TestKey() {
  ChannelMaterial key;
  key.key = SecretBytes::FromString(RandomString(32));
  RandomBytes(key.iv_mask.data(), key.iv_mask.size());
  key.channel_counter = 3;
  return key;
}

// The cyclic source's first `n` bytes, spelled out.
std::string Cyclic(PlaintextSource& s, uint64_t n) {
  std::string out(n, '\0');
  EXPECT_TRUE(s.Read(0, reinterpret_cast<uint8_t*>(&out[0]), n).ok());
  return out;
}

TEST(StagePipelineZeroCopyTest, SameTagsAsTheWriterForViewsAndCopies) {
  const uint64_t kLength = (1u << 20) + 4096;  // last chunk short
  PlaintextSource source(kLength, 64 << 10);
  ChannelMaterial key = TestKey();
  auto expected = WindowDigest(key, 3, 9, 0, Cyclic(source, kLength), 64 << 10, 5);
  ASSERT_TRUE(expected.ok());
  for (int threads : {1, 2, 3}) {
    StageOptions o;
    o.chunk_size = 64 << 10;
    o.threads = threads;
    auto views = RunEncryptAndStage(key, 3, 9, kLength, 5, source, o);
    ASSERT_TRUE(views.ok()) << views.status();
    EXPECT_TRUE(views->zero_copy);
    EXPECT_EQ(views->chunks, 17u);
    EXPECT_EQ(views->digest, *expected) << threads << " thread(s), views";
    auto copies = RunEncryptAndStage(key, 3, 9, kLength, 5, source.AsChunkSource(), o);
    ASSERT_TRUE(copies.ok()) << copies.status();
    EXPECT_FALSE(copies->zero_copy);
    EXPECT_EQ(copies->digest, *expected) << threads << " thread(s), copies";
  }
}

// What the replica leaves in the ring is what the writer would: each slot
// holds its last chunk's ciphertext and the ring's tag area that chunk's tag
// (the copy engine reads it there).
TEST(StagePipelineZeroCopyTest, RingHoldsTheCiphertextAndTagsTheWriterWouldStage) {
  char tmpl[] = "/tmp/gputravel-stage-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  struct RemoveAll {  // also when an assertion ends the test early
    std::string d;
    ~RemoveAll() { std::filesystem::remove_all(d); }
  } cleanup{dir};
  {
    BouncePool pool(dir);
    const uint32_t cs = 64 << 10;
    const uint64_t kLength = 8 * uint64_t{cs};
    PlaintextSource source(kLength, cs);
    ChannelMaterial key = TestKey();
    StageOptions o;
    o.chunk_size = cs;
    o.threads = 2;
    o.pool = &pool;
    auto r = RunEncryptAndStage(key, 3, 9, kLength, 5, source, o);
    ASSERT_TRUE(r.ok()) << r.status();
    auto lease = pool.Acquire(4, cs);  // the kept ring: 4 slots (threads + 1 raised to 4)
    ASSERT_TRUE(lease.ok()) << lease.status();
    ASSERT_FALSE(lease->fresh());
    BounceBuffer* ring = lease->ring();
    const std::string plain = Cyclic(source, kLength);
    auto cipher = ChannelCipher::Create(key);
    ASSERT_TRUE(cipher.ok());
    for (uint32_t i = 4; i < 8; ++i) {
      const uint32_t s = i % 4;
      std::string aad = ChunkAad(3, 9, uint64_t{i} * cs, cs);
      std::string ct(cs, '\0');
      uint8_t tag[16];
      ASSERT_TRUE((*cipher)
                      ->Encrypt(5 + i, reinterpret_cast<const uint8_t*>(aad.data()), aad.size(),
                                reinterpret_cast<const uint8_t*>(plain.data()) + uint64_t{i} * cs,
                                cs, reinterpret_cast<uint8_t*>(&ct[0]), tag)
                      .ok());
      EXPECT_TRUE(std::memcmp(ring->slot(s), ct.data(), cs) == 0) << "slot " << s;
      EXPECT_TRUE(std::memcmp(ring->tag(s), tag, 16) == 0) << "tag of slot " << s;
    }
  }
}

TEST(StagePipelineZeroCopyTest, ViewsWrapAroundTheSourceEnd) {
  // 100 KiB of data served cyclically in 32 KiB chunks: views cross the end.
  PlaintextSource source(100 << 10, 32 << 10);
  const uint64_t kLength = 1u << 20;
  ChannelMaterial key = TestKey();
  StageOptions o;
  o.chunk_size = 32 << 10;
  o.threads = 2;
  auto r = RunEncryptAndStage(key, 1, 1, kLength, 1, source, o);
  ASSERT_TRUE(r.ok()) << r.status();
  auto expected = WindowDigest(key, 1, 1, 0, Cyclic(source, kLength), o.chunk_size, 1);
  EXPECT_EQ(r->digest, *expected);
  // Longer views than the source was built for are refused, not wrapped wrong.
  EXPECT_EQ(source.View(0, (32 << 10) + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bench
}  // namespace gputravel
