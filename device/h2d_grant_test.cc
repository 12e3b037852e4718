// The session's owner grants each copy engine's H2D slot to the window it
// hands out (GrantH2dCommand): the buffer, the byte range and the counters
// the key may write. A holder that keeps its key (or keys) can write nothing
// else while they live, and every chunk it tries outside its window under a
// granted key is counted where the owner reads it (sealed in every reply).
#include <string>

#include "device/emulated_gpu_fixture.h"
#include "gtest/gtest.h"
#include "keyxfer/device_session.h"

namespace gputravel {
namespace {

using testing_fixture::EmulatedGpuFixture;
using testing_fixture::kOwner;

class H2dGrantTest : public EmulatedGpuFixture {
 protected:
  int Code(const absl::StatusOr<v1::DeviceReply>& r) {
    return r.ok() ? r->code() : static_cast<int>(r.status().code());
  }
};

// Attack: a holder with its key aims at another buffer and outside its
// range and counters. Without grants the chunk for the other buffer lands
// (the device checks only the key, the counter and the holder's own AAD).
TEST_F(H2dGrantTest, KeyKeepingHolderWritesOnlyItsOwnWindow) {
  uint64_t other = Alloc(kBufferBytes);  // another holder's, or the trainer's
  ASSERT_NE(other, 0u);
  auto g = Grant(0, buffer_, 0, 4096, 2);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->code(), 0) << g->message();
  EXPECT_EQ(g->h2d_grant_refusals(), 0u);

  // Another buffer, with a tag that is valid for it.
  auto r = gpu_->SubmitH2D(kOwner, StageOn(keys_.lce_h2d, 1, 0, other, 0, std::string(64, 'X')));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
  // Its own buffer, past its range; and across the range's end.
  r = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 1, 4096, std::string(64, 'Y')));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
  r = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 2, 4064, std::string(64, 'Z')));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
  EXPECT_EQ(GrantRefusals(), 3u);
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 1u) << "a refused chunk took a counter";

  // Its window, in order, lands.
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'))).ok());
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 2, 1, 64, std::string(64, 'b'))).ok());
  // One past its counters, inside its range.
  r = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 3, 2, 128, std::string(64, 'c')));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange) << r.status();
  EXPECT_EQ(GrantRefusals(), 4u);

  // Not the key's: refused, but not counted against the key's holder (the
  // host can stage anything; only the key's holder can make it authenticate).
  ChannelMaterial wrong = keys_.lce_h2d.Clone();
  wrong.key.data()[0] ^= 1;
  r = gpu_->SubmitH2D(kOwner, StageOn(wrong, 3, 3, other, 0, std::string(64, 'W')));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange) << r.status();
  EXPECT_EQ(GrantRefusals(), 4u);

  // Nothing outside the window changed; the count is in every sealed reply
  // (a read-back's too) and in the host's status.
  std::swap(buffer_, other);
  EXPECT_EQ(Read(0, kBufferBytes), std::string(kBufferBytes, '\0'));
  std::swap(buffer_, other);
  v1::DeviceCommand read;
  read.mutable_read()->set_buffer_id(buffer_);
  read.mutable_read()->set_length(4096 + 64);
  auto back = Command(read);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->data(), std::string(64, 'a') + std::string(64, 'b') +
                              std::string(4096 - 128 + 64, '\0'));
  EXPECT_EQ(back->h2d_grant_refusals(), 4u);
  const v1::DeviceStatus st = gpu_->Status();
  ASSERT_GE(st.copy_engines_size(), 1);
  EXPECT_EQ(st.copy_engines(0).h2d_grant_refusals(), 4u);
  EXPECT_EQ(st.copy_engines(0).h2d_next_counter(), 3u);
}

// k engines, each granted its own range: a key of one engine cannot write
// the range of another, and each engine's window lands.
TEST_F(H2dGrantTest, EachEngineIsGrantedItsOwnWindow) {
  const ChannelMaterial k1 = *DeriveCopyEngineKey(secret_, 1, true);
  v1::DeviceCommand c;
  for (uint32_t e = 0; e < 2; ++e) {
    v1::H2dGrant* g = c.mutable_grant_h2d()->add_grants();
    g->set_copy_engine(e);
    g->set_buffer_id(buffer_);
    g->set_offset(e * 4096);
    g->set_length(4096);
    g->set_last_counter(1);
  }
  auto r = Command(c);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->code(), 0) << r->message();
  auto s = gpu_->SubmitH2D(kOwner, StageAt(k1, 1, 1, 0, buffer_, 0, std::string(64, 'x')));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kPermissionDenied) << s.status();
  EXPECT_EQ(GrantRefusals(), 1u);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, StageAt(keys_.lce_h2d, 0, 1, 0, buffer_, 0,
                                              std::string(64, 'a')))
                  .ok());
  ASSERT_TRUE(
      gpu_->SubmitH2D(kOwner, StageAt(k1, 1, 1, 1, buffer_, 4096, std::string(64, 'b'))).ok());
  EXPECT_EQ(Read(0, 64), std::string(64, 'a'));
  EXPECT_EQ(Read(4096, 64), std::string(64, 'b'));
  v1::DeviceCommand q;
  q.mutable_query()->set_copy_engine(1);
  auto qr = Command(q);
  ASSERT_TRUE(qr.ok());
  EXPECT_EQ(qr->h2d_grant_buffer(), buffer_);
  EXPECT_EQ(qr->h2d_grant_offset(), 4096u);
  EXPECT_EQ(qr->h2d_grant_length(), 4096u);
  EXPECT_EQ(qr->h2d_last_counter(), 1u);
}

// A grant is all or none, and checked: a missing buffer, a range outside
// it, an empty range, an engine named twice or one the GPU does not have,
// a bound behind chunks already taken.
TEST_F(H2dGrantTest, GrantsAreCheckedAndAllOrNone) {
  auto two = [&](uint64_t second_buffer) {
    v1::DeviceCommand c;
    v1::H2dGrant* a = c.mutable_grant_h2d()->add_grants();
    a->set_copy_engine(0);
    a->set_buffer_id(buffer_);
    a->set_length(64);
    a->set_last_counter(5);
    v1::H2dGrant* b = c.mutable_grant_h2d()->add_grants();
    b->set_copy_engine(1);
    b->set_buffer_id(second_buffer);
    b->set_length(64);
    b->set_last_counter(5);
    return Command(c);
  };
  EXPECT_EQ(Code(two(buffer_ + 100)), static_cast<int>(absl::StatusCode::kNotFound));
  v1::DeviceCommand q;
  q.mutable_query();
  EXPECT_EQ(Command(q)->h2d_grant_buffer(), 0u) << "the first grant was applied alone";
  EXPECT_EQ(Command(q)->h2d_last_counter(), kLastMessageCounter);
  EXPECT_EQ(Code(Grant(0, buffer_, kBufferBytes - 32, 64, 5)),
            static_cast<int>(absl::StatusCode::kOutOfRange));
  EXPECT_EQ(Code(Grant(0, buffer_, 0, 0, 5)), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(Code(Grant(8, buffer_, 0, 64, 5)), static_cast<int>(absl::StatusCode::kInvalidArgument));
  v1::DeviceCommand dup;
  for (int i = 0; i < 2; ++i) {
    v1::H2dGrant* g = dup.mutable_grant_h2d()->add_grants();
    g->set_buffer_id(buffer_);
    g->set_length(64);
    g->set_last_counter(5);
  }
  EXPECT_EQ(Code(Command(dup)), static_cast<int>(absl::StatusCode::kInvalidArgument));
  // Chunks at counters 1 and 2 taken: a bound of 1 would cut behind them.
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'))).ok());
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 2, 1, 64, std::string(64, 'b'))).ok());
  EXPECT_EQ(Code(Grant(0, buffer_, 0, 4096, 1)),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(Code(Grant(0, buffer_, 0, 4096, 2)), 0);
  EXPECT_EQ(GrantRefusals(), 0u);
}

// A rotation opens a new IV space, ungranted until its own hand-off.
TEST_F(H2dGrantTest, RotationLiftsTheGrant) {
  ASSERT_EQ(Code(Grant(0, buffer_, 0, 64, 1)), 0);
  v1::DeviceCommand rotate;
  rotate.mutable_rotate_iv()->set_h2d(true);
  ASSERT_EQ(Code(Command(rotate)), 0);
  v1::DeviceCommand q;
  q.mutable_query();
  auto r = Command(q);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->h2d_last_counter(), kLastMessageCounter);
  EXPECT_EQ(r->h2d_grant_buffer(), 0u);
}

}  // namespace
}  // namespace gputravel
