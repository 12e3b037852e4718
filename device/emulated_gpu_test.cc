#include "device/emulated_gpu.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <limits>
#include <random>
#include <vector>

#include "device/bounce_buffer.h"
#include "device/d2h_receiver.h"
#include "gtest/gtest.h"
#include "device/emulated_gpu_fixture.h"
#include "device/exchange_transcript.h"
#include "keyxfer/device_session.h"
#include "keyxfer/random.h"
#include "keyxfer/x509.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

using testing_fixture::kOwner;

// Drives the emulated GPU directly, as a driver would, with real keys.
class EmulatedGpuTest : public testing_fixture::EmulatedGpuFixture {};

// The responder's ephemeral key is made ahead, serves exactly one exchange,
// and a reset discards it like every other key.
TEST_F(EmulatedGpuTest, EphemeralKeyMadeAheadServesOneExchangeAndDiesOnReset) {
  // The setup exchanged once; the next key is being made already.
  const std::string pending = gpu_->PendingEphemeralForTest();
  ASSERT_FALSE(pending.empty());
  auto eph = *EcKey::Generate(Curve::kP384);
  v1::KeyExchangeRequest req;
  req.set_requester_public_key(eph.PublicPoint());
  req.set_requester_nonce(RandomString(32));
  auto first = gpu_->KeyExchange(kOwner, req);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->device_public_key(), pending);  // the one made ahead
  // Used up: the next exchange gets another one, made ahead in turn.
  const std::string next = gpu_->PendingEphemeralForTest();
  ASSERT_FALSE(next.empty());
  EXPECT_NE(next, pending);
  // A reset wipes the pending key: the next exchange uses another one.
  gpu_->Reset();
  const std::string after_reset = gpu_->PendingEphemeralForTest();
  EXPECT_NE(after_reset, next);
  auto second = gpu_->KeyExchange(kOwner, req);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(second->device_public_key(), next);
  EXPECT_NE(second->device_public_key(), first->device_public_key());
}

TEST_F(EmulatedGpuTest, InOrderChunksLandInDeviceMemory) {
  std::string a(1024, 'a'), b(1024, 'b');
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, a)).ok());
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 2, 1, 1024, b)).ok());
  EXPECT_EQ(Read(0, 2048), a + b);
}

TEST_F(EmulatedGpuTest, OutOfOrderChunkRefused) {
  auto r2 = Stage(keys_.lce_h2d, 2, 1, 1024, std::string(1024, 'b'));
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, r2).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Read(1024, 1024), std::string(1024, '\0'));
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 1u) << "a refused chunk uses no counter";
  // The chunk that was due is still taken, and then the one that came early.
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(1024, 'a'))).ok());
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 2, 1, 1024, std::string(1024, 'b'))).ok());
  EXPECT_EQ(Read(0, 2048), std::string(1024, 'a') + std::string(1024, 'b'));
}

TEST_F(EmulatedGpuTest, ReplayedChunkRefused) {
  auto r1 = Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'));
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, r1).ok());
  // The same chunk replayed, once the slot holds other data: the device
  // decrypts at its next counter, so the old tag does not check.
  auto r2 = Stage(keys_.lce_h2d, 2, 1, 64, std::string(64, 'b'));
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, r2).ok());
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, r1).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(gpu_->Status().rejected_chunks(), 1u);
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 3u) << "a refused chunk uses no counter";
  EXPECT_EQ(Read(0, 128), std::string(64, 'a') + std::string(64, 'b'));
}

TEST_F(EmulatedGpuTest, WrongTagRefusedAndMemoryUntouched) {
  auto r1 = Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'));
  bounce_->tag(0)[0] ^= 1;
  EXPECT_FALSE(gpu_->SubmitH2D(kOwner, r1).ok());
  EXPECT_EQ(Read(0, 64), std::string(64, '\0'));
}

TEST_F(EmulatedGpuTest, RedirectedChunkRefused) {
  // The host moves a staged chunk to another offset: the AAD binds it.
  auto r1 = Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'));
  r1.set_offset(64);
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, r1).status().code(), absl::StatusCode::kUnauthenticated);
  // Or claims another length, or another buffer.
  r1.set_offset(0);
  r1.set_length(32);
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, r1).status().code(), absl::StatusCode::kUnauthenticated);
  const uint64_t other = Alloc(4096);
  r1.set_length(64);
  r1.set_buffer_id(other);
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, r1).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Read(0, 128), std::string(128, '\0'));
  const uint64_t mine = buffer_;
  buffer_ = other;
  EXPECT_EQ(Read(0, 64), std::string(64, '\0'));
  buffer_ = mine;
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 1u) << "a refused chunk uses no counter";
  EXPECT_EQ(gpu_->Status().rejected_chunks(), 3u);
}

// The doorbell names a slot of the ring and a non-empty length; each chunk
// below carries a valid tag, so only the rule refuses it (a slot outside the
// ring would otherwise be read from outside the mapping).
TEST_F(EmulatedGpuTest, SlotOutsideTheRingOrEmptyChunkRefused) {
  for (uint32_t slot : {4u, std::numeric_limits<uint32_t>::max()}) {
    auto r = Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'));
    r.set_slot(slot);
    auto st = gpu_->SubmitH2D(kOwner, r);
    EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument) << slot;
    EXPECT_NE(st.status().message().find("outside bounce buffer"), std::string::npos)
        << st.status();
  }
  auto empty = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, ""));
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("length is 0"), std::string::npos) << empty.status();
  EXPECT_EQ(gpu_->Status().rejected_chunks(), 3u);
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 1u) << "a refused chunk uses no counter";
  EXPECT_EQ(Read(0, 64), std::string(64, '\0'));
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'))).ok());
  EXPECT_EQ(Read(0, 64), std::string(64, 'a'));
}

// The copy engine's rule (UVM_CONF_COMPUTING_BUF_ALIGNMENT): a buffer must be
// 32-byte aligned unless it lies in one 32-byte segment. Each refused chunk
// carries a valid tag for where it claims to land, so only the rule refuses
// it.
TEST_F(EmulatedGpuTest, MisalignedOffsetRefused) {
  struct Case {
    uint64_t offset;
    uint32_t length;
  };
  for (const Case& c : {Case{16, 33}, Case{16, 64}, Case{16, 32}, Case{31, 2}, Case{96 + 1, 32}}) {
    auto r1 = Stage(keys_.lce_h2d, 1, 0, c.offset, std::string(c.length, 'a'));
    auto st = gpu_->SubmitH2D(kOwner, r1);
    EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument)
        << c.length << " at " << c.offset;
    EXPECT_NE(st.status().message().find("aligned"), std::string::npos);
  }
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 1u);
  EXPECT_EQ(Read(0, 160), std::string(160, '\0'));
  // Within one 32-byte segment a chunk may land anywhere.
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 16, std::string(16, 'b'))).ok());
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 2, 1, 101, std::string(7, 'c'))).ok());
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 3, 2, 64, std::string(32, 'd'))).ok());
  EXPECT_EQ(Read(0, 128), std::string(16, '\0') + std::string(16, 'b') + std::string(32, '\0') +
                              std::string(32, 'd') + std::string(5, '\0') + std::string(7, 'c') +
                              std::string(20, '\0'));
  // Reads (the D2H copy's source) follow the same rule.
  v1::DeviceCommand rd;
  rd.mutable_read()->set_buffer_id(buffer_);
  rd.mutable_read()->set_offset(16);
  rd.mutable_read()->set_length(32);
  auto refused = Command(rd);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(Read(16, 16), std::string(16, 'b'));
  EXPECT_EQ(Read(101, 7), std::string(7, 'c'));
}

// The copy engine is given the tag's address, not the tag: it must be 16-byte
// aligned and inside the ring; the tag is read from wherever it names.
TEST_F(EmulatedGpuTest, TagAddressMustBeAlignedAndInTheRing) {
  auto r = Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'));
  const uint64_t at = r.tag_offset();
  EXPECT_EQ(at, 4u * 4096) << "the tag area follows the slots";
  const uint64_t rejected = gpu_->Status().rejected_chunks();
  for (uint64_t bad : {at + 8, at + 1, at - 4}) {
    r.set_tag_offset(bad);
    auto st = gpu_->SubmitH2D(kOwner, r);
    EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.status().message().find("16-byte aligned"), std::string::npos) << st.status();
  }
  // Past the ring, or in its slots (a doorbell that left it at 0).
  for (uint64_t outside : {uint64_t{bounce_->length()}, ~uint64_t{15}, uint64_t{0},
                           at - 16}) {
    r.set_tag_offset(outside);
    auto st = gpu_->SubmitH2D(kOwner, r);
    EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument) << outside;
    EXPECT_NE(st.status().message().find("outside the tag area"), std::string::npos)
        << st.status();
  }
  EXPECT_EQ(gpu_->Status().rejected_chunks(), rejected + 7);
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 1u);
  EXPECT_EQ(Read(0, 64), std::string(64, '\0'));
  // Another aligned address in the tag area holding the right tag is read.
  std::memcpy(bounce_->tag(3), bounce_->tag(0), 16);
  std::memset(bounce_->tag(0), 0, 16);
  r.set_tag_offset(bounce_->tag_offset(3));
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, r).ok());
  EXPECT_EQ(Read(0, 64), std::string(64, 'a'));
}

// A holder has the key, so it can tag a chunk for any destination: the
// bounds check alone keeps it inside the buffer.
TEST_F(EmulatedGpuTest, ChunkPastTheBufferWithAValidTagIsRefused) {
  for (uint64_t off : {uint64_t{8192 - 32}, uint64_t{8192}, uint64_t{1} << 40}) {
    auto st = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, off, std::string(64, 'x')));
    EXPECT_EQ(st.status().code(), absl::StatusCode::kOutOfRange) << off << ": " << st.status();
  }
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 1u);
  EXPECT_EQ(Read(0, 8192), std::string(8192, '\0'));
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
}

TEST_F(EmulatedGpuTest, CounterOverflowRefused) {
  gpu_->SetH2dCounterForTest(kLastMessageCounter);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, kLastMessageCounter, 0, 0,
                                            std::string(32, 'x'))).ok());
  auto st = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 0, 1, 32, std::string(32, 'y')));
  EXPECT_EQ(st.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Read(0, 64), std::string(32, 'x') + std::string(32, '\0'));
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), kLastMessageCounter) << "it does not wrap";
}

TEST_F(EmulatedGpuTest, KeyFromBeforeRekeyRefused) {
  ChannelMaterial old_key = keys_.lce_h2d.Clone();
  uint64_t old_session = session_;
  Establish();
  v1::AttachBounceRequest ab;  // the old session's ring went with it
  ab.set_path(bounce_->path());
  ab.set_slots(4);
  ab.set_slot_size(4096);
  bounce_id_ = *gpu_->AttachBounce(kOwner, ab);
  auto r = Stage(old_key, 1, 0, 0, std::string(64, 'a'));
  // Claiming the old session: refused as dead.
  r.set_session_id(old_session);
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, r).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Claiming the new session with the old key: the tag fails.
  r.set_session_id(session_);
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, r).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Read(0, 64), std::string(64, '\0'));
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 1u) << "a refused chunk uses no counter";
  EXPECT_EQ(gpu_->Status().rejected_chunks(), 2u);
}

TEST_F(EmulatedGpuTest, RequestsFromOtherDomainsRefused) {
  auto r1 = Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'));
  EXPECT_EQ(gpu_->SubmitH2D("holder-b", r1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(gpu_->GetIdentity("holder-b").ok());
  EXPECT_EQ(gpu_->Status().rejected_chunks(), 0u) << "not even looked at";
  // Routed to holder-b, the device no longer reaches the first domain's
  // ring: a route change unmaps the rings, so holder-b cannot have the
  // device read them, or detach them.
  gpu_->SetOwner("holder-b");
  EXPECT_EQ(gpu_->Status().bounce_buffers(), 0u);
  EXPECT_EQ(gpu_->SubmitH2D("holder-b", r1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu_->DetachBounce("holder-b", bounce_id_).code(), absl::StatusCode::kNotFound);
  // Back with its owner, the ring must be attached again; the chunk, which
  // consumed nothing, then lands.
  gpu_->SetOwner(kOwner);
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, r1).status().code(), absl::StatusCode::kInvalidArgument);
  Attach();
  r1.set_bounce_id(bounce_id_);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, r1).ok());
  EXPECT_EQ(Read(0, 64), std::string(64, 'a'));
  // The same owner again changes nothing.
  gpu_->SetOwner(kOwner);
  EXPECT_EQ(gpu_->Status().bounce_buffers(), 1u);
}

TEST_F(EmulatedGpuTest, ControlFromAnotherKeyRefused) {
  ChannelMaterial bogus = keys_.gsp_h2d.Clone();
  RandomBytes(bogus.key.data(), 32);
  auto ch = *SealedChannel::Create(bogus, keys_.gsp_d2h);
  v1::DeviceCommand c;
  c.mutable_scrub()->set_buffer_id(buffer_);
  v1::SealedMessage req;
  req.set_session_id(session_);
  req.set_ciphertext(*ch->Seal(ControlAad(true, session_), c.SerializeAsString(), nullptr));
  EXPECT_EQ(gpu_->Control(kOwner, req).status().code(),
            absl::StatusCode::kUnauthenticated);
}

// A command riding on a key exchange runs under the session the exchange
// ends, before it ends it; one the device cannot open is answered as
// Control would refuse it, and does not stop the exchange.
TEST_F(EmulatedGpuTest, CommandRidingOnTheExchangeRunsUnderTheSessionItEnds) {
  const std::string data(4096, '\x7e');
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, kFirstMessageCounter, 0, 0, data)).ok());
  auto request = [] {
    auto eph = *EcKey::Generate(Curve::kP384);
    v1::KeyExchangeRequest req;
    req.set_requester_public_key(eph.PublicPoint());
    req.set_requester_nonce(RandomString(32));
    return req;
  };
  v1::DeviceCommand read;
  read.mutable_read()->set_buffer_id(buffer_);
  read.mutable_read()->set_length(4096);
  const uint64_t old_session = session_;
  v1::KeyExchangeRequest req = request();
  RideOn(&req, read, /*keep=*/true);
  v1::SealedMessage sealed = req.prior_command();
  auto resp = gpu_->KeyExchange(kOwner, req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_GT(resp->session_id(), old_session);
  EXPECT_EQ(resp->prior_error_code(), 0) << resp->prior_error();
  EXPECT_TRUE(resp->memory_kept());
  // Sealed under the old session's device-to-host key, in its order.
  EXPECT_EQ(resp->prior_reply().session_id(), old_session);
  auto plain = control_->Open(ControlAad(false, old_session), resp->prior_reply().ciphertext());
  ASSERT_TRUE(plain.ok()) << plain.status();
  v1::DeviceReply reply;
  ASSERT_TRUE(reply.ParseFromString(*plain));
  EXPECT_EQ(reply.code(), 0);
  EXPECT_TRUE(reply.data().empty()) << "the bytes come as the D2H copy";
  // ...under the old session's D2H key, in its order.
  v1::DeviceCommand read_only = read;
  ASSERT_TRUE(d2h_.Open(read_only, old_session, resp->prior_reply().d2h_copy(), &reply).ok());
  EXPECT_TRUE(reply.data() == data);
  // The old session is gone: the same command again is refused.
  sealed.set_ciphertext(
      *control_->Seal(ControlAad(true, old_session), read.SerializeAsString(), nullptr));
  EXPECT_EQ(gpu_->Control(kOwner, sealed).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(gpu_->Status().buffers(), 1u) << "the authorised exchange kept memory";

  // Under a session that no longer exists: refused, the exchange still done,
  // and nothing authorised it to keep memory.
  req = request();
  *req.mutable_prior_command() = sealed;
  resp = gpu_->KeyExchange(kOwner, req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->prior_error_code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(resp->has_prior_reply());
  EXPECT_FALSE(resp->memory_kept());
  EXPECT_EQ(gpu_->Status().buffers(), 0u);
  const uint64_t current = resp->session_id();

  // Under the current session's id but another key: not executed, the
  // exchange still done, memory not kept.
  ChannelMaterial bogus = keys_.gsp_h2d.Clone();
  RandomBytes(bogus.key.data(), 32);
  auto ch = *SealedChannel::Create(bogus, keys_.gsp_d2h);
  req = request();
  v1::DeviceCommand scrub;
  scrub.mutable_scrub()->set_buffer_id(buffer_);
  scrub.mutable_keep_memory()->set_requester_public_key(req.requester_public_key());
  scrub.mutable_keep_memory()->set_requester_nonce(req.requester_nonce());
  req.mutable_prior_command()->set_session_id(current);
  req.mutable_prior_command()->set_ciphertext(
      *ch->Seal(ControlAad(true, current), scrub.SerializeAsString(), nullptr));
  resp = gpu_->KeyExchange(kOwner, req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->prior_error_code(), static_cast<int>(absl::StatusCode::kUnauthenticated));
  EXPECT_GT(resp->session_id(), current);
  EXPECT_FALSE(resp->memory_kept());

  // Not from the domain the GPU is routed to: neither runs.
  Establish(/*keep=*/false);
  buffer_ = Alloc(4096);
  Attach();
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, kFirstMessageCounter, 0, 0, data)).ok());
  req = request();
  RideOn(&req, scrub, /*keep=*/true);
  EXPECT_EQ(gpu_->KeyExchange("holder-b", req).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(gpu_->Status().buffers(), 1u) << "a refused request changed nothing";
  EXPECT_FALSE(gpu_->MemoryIsZeroForTest());
  // The refused command used a counter of the session's channel that the
  // device never saw: the next authorisation is out of step, so it opens
  // nothing and memory is wiped rather than kept.
  Establish();
  EXPECT_EQ(gpu_->Status().buffers(), 0u);
}

// The session a riding command ran under ends with the exchange even when
// the exchange itself then fails (here: the requester's key is not a point
// of the curve, as a host that corrupted the request would make it): nothing
// runs under the old session after its command.
TEST_F(EmulatedGpuTest, AFailedExchangeStillEndsTheSessionItsCommandRanUnder) {
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'o'))).ok());
  const uint64_t old_session = session_;
  v1::DeviceCommand read;
  read.mutable_read()->set_buffer_id(buffer_);
  read.mutable_read()->set_length(64);
  v1::KeyExchangeRequest req;
  std::string bad_point = (*EcKey::Generate(Curve::kP384)).PublicPoint();
  bad_point.back() ^= 1;
  req.set_requester_public_key(bad_point);
  req.set_requester_nonce(RandomString(32));
  RideOn(&req, read, /*keep=*/true);
  EXPECT_FALSE(gpu_->KeyExchange(kOwner, req).ok());
  EXPECT_EQ(gpu_->Status().session_id(), 0u);
  EXPECT_EQ(gpu_->Status().bounce_buffers(), 0u);
  // Neither a chunk under the old key nor a command under the old session.
  Attach();
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 2, 1, 64, std::string(64, 'p')))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  v1::SealedMessage again;
  again.set_session_id(old_session);
  again.set_ciphertext(
      *control_->Seal(ControlAad(true, old_session), read.SerializeAsString(), nullptr));
  EXPECT_EQ(gpu_->Control(kOwner, again).status().code(), absl::StatusCode::kFailedPrecondition);
  // Memory the failed exchange was authorised to keep is still there, but
  // no session can reach it, and no session is left that could authorise
  // the next exchange: that one wipes it.
  EXPECT_FALSE(gpu_->MemoryIsZeroForTest());
  Establish();
  EXPECT_EQ(gpu_->Status().buffers(), 0u);
  EXPECT_TRUE(gpu_->MemoryIsZeroForTest());
}

// A failed exchange leaves no session but device memory as it was: the
// heartbeat rule stays armed, so nobody watching still means a wipe.
TEST_F(EmulatedGpuTest, AFailedExchangeLeavesTheHeartbeatArmed) {
  absl::Time now = absl::FromUnixSeconds(1000);
  EmulatedGpuOptions o;
  o.memory_bytes = 1 << 20;
  o.heartbeat_period = absl::Seconds(4);
  o.clock = [&now] { return now; };
  Restart(o, 4096);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'k'))).ok());
  v1::KeyExchangeRequest req;
  std::string bad_point = (*EcKey::Generate(Curve::kP384)).PublicPoint();
  bad_point.back() ^= 1;
  req.set_requester_public_key(bad_point);
  req.set_requester_nonce(RandomString(32));
  RideOn(&req, v1::DeviceCommand(), /*keep=*/true);  // the owner's (failing) re-key
  EXPECT_FALSE(gpu_->KeyExchange(kOwner, req).ok());
  EXPECT_EQ(gpu_->Status().session_id(), 0u);
  now += absl::Seconds(8);
  EXPECT_FALSE(gpu_->Status().needs_reset());
  EXPECT_FALSE(gpu_->MemoryIsZeroForTest());
  now += absl::Milliseconds(1);
  EXPECT_TRUE(gpu_->Status().needs_reset());
  EXPECT_TRUE(gpu_->MemoryIsZeroForTest());
  // After the reset, with no session yet, there is nothing to watch.
  gpu_->Reset();
  now += absl::Seconds(60);
  EXPECT_FALSE(gpu_->Status().needs_reset());
}

TEST_F(EmulatedGpuTest, ScrubZeroesMemory) {
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'))).ok());
  v1::DeviceCommand c;
  c.mutable_scrub()->set_buffer_id(buffer_);
  auto r = Command(c);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes_scrubbed(), 8192u);
  EXPECT_TRUE(r->data().empty());  // no read-back asked for
  EXPECT_EQ(Read(0, 8192), std::string(8192, '\0'));
}

TEST_F(EmulatedGpuTest, ScrubReadsBackDeviceMemoryAfterZeroing) {
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'))).ok());
  // A read-back beyond the buffer is refused before anything is zeroed.
  v1::DeviceCommand too_far;
  too_far.mutable_scrub()->set_buffer_id(buffer_);
  too_far.mutable_scrub()->set_read_back(8193);
  auto refused = Command(too_far);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->code(), static_cast<int>(absl::StatusCode::kOutOfRange));
  EXPECT_EQ(Read(0, 64), std::string(64, 'a'));

  v1::DeviceCommand c;
  c.mutable_scrub()->set_buffer_id(buffer_);
  c.mutable_scrub()->set_read_back(8192);
  auto r = Command(c);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->code(), 0);
  EXPECT_EQ(r->bytes_scrubbed(), 8192u);
  EXPECT_EQ(r->data(), std::string(8192, '\0'));
}

TEST_F(EmulatedGpuTest, ResetWipesSessionKeysAndMemory) {
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'))).ok());
  gpu_->Reset();
  v1::DeviceCommand c;
  c.mutable_query();
  EXPECT_EQ(Command(c).status().code(), absl::StatusCode::kFailedPrecondition);
  auto st = gpu_->Status();
  EXPECT_EQ(st.session_id(), 0u);
  EXPECT_EQ(st.buffers(), 0u);
  EXPECT_EQ(st.resets(), 1u);
  EXPECT_TRUE(gpu_->ScratchIsClearForTest()) << "no plaintext outlives the reset";
  // The pre-reset session and its key are dead.
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 2, 1, 64, std::string(64, 'b')))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  const ChannelMaterial old_lce = keys_.lce_h2d.Clone();
  const uint64_t old_session = session_;
  Establish();  // a new session finds no trace of the old buffer
  EXPECT_GT(session_, old_session);
  EXPECT_FALSE(old_lce.key.Equals(keys_.lce_h2d.key));
  v1::DeviceCommand rd;
  rd.mutable_read()->set_buffer_id(buffer_);
  rd.mutable_read()->set_length(64);
  auto reply = Command(rd);  // delivered under the new session...
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->code(), static_cast<int>(absl::StatusCode::kNotFound));  // ...no buffer
  EXPECT_TRUE(reply->data().empty());
  // The old key, under the new session's id, does not check either.
  buffer_ = Alloc(8192);
  Attach();
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, Stage(old_lce, 1, 0, 0, std::string(64, 'c')))
                .status()
                .code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Read(0, 64), std::string(64, '\0'));
}

TEST_F(EmulatedGpuTest, AllocBeyondMemoryRefused) {
  v1::DeviceCommand c;
  c.mutable_alloc()->set_size(2 << 20);
  auto r = Command(c);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  // A size that would wrap the memory count around is refused too.
  c.mutable_alloc()->set_size(std::numeric_limits<uint64_t>::max() - 31);
  EXPECT_EQ(Code(Command(c)), absl::StatusCode::kResourceExhausted);
  c.mutable_alloc()->set_size((1 << 20) - 8192);  // exactly what is left
  EXPECT_EQ(Code(Command(c)), absl::StatusCode::kOk);
}

// A buffer is a non-zero multiple of 32 bytes (the copy engine's unit); one
// read-back, a Read's or a scrub's, is at most 32 MiB, and a scrub whose
// read-back is refused zeroes nothing.
TEST_F(EmulatedGpuTest, BufferAndReadBackSizesChecked) {
  for (uint64_t size : {uint64_t{0}, uint64_t{48}, uint64_t{4096 + 1}}) {
    v1::DeviceCommand c;
    c.mutable_alloc()->set_size(size);
    EXPECT_EQ(Code(Command(c)), absl::StatusCode::kInvalidArgument) << size;
  }
  EmulatedGpuOptions o;
  o.memory_bytes = 40ull << 20;
  const uint64_t big = (32ull << 20) + 64;
  Restart(o, big);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 's'))).ok());
  v1::DeviceCommand rd;
  rd.mutable_read()->set_buffer_id(buffer_);
  rd.mutable_read()->set_length((32ull << 20) + 32);
  EXPECT_EQ(Code(Command(rd)), absl::StatusCode::kOutOfRange);
  v1::DeviceCommand scrub;
  scrub.mutable_scrub()->set_buffer_id(buffer_);
  scrub.mutable_scrub()->set_read_back((32ull << 20) + 32);
  EXPECT_EQ(Code(Command(scrub)), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(Read(0, 64), std::string(64, 's')) << "the refused scrub zeroed nothing";
  rd.mutable_read()->set_offset(32);
  rd.mutable_read()->set_length(32ull << 20);  // exactly 32 MiB: served
  auto whole = Command(rd);
  ASSERT_EQ(Code(whole), absl::StatusCode::kOk);
  EXPECT_EQ(whole->data().substr(0, 32), std::string(32, 's'));
  EXPECT_EQ(whole->data().size(), 32ull << 20);
}

TEST_F(EmulatedGpuTest, RotationThresholdEnforced) {
  auto ca = *EcKey::Generate(Curve::kP384);
  auto ca_der = *IssueCertificate(ca, "ca", ca, "", true, 1);
  auto id = *EcKey::Generate(Curve::kP384);
  EmulatedGpuOptions o;
  o.serial = "EMU-1";
  o.rotation_threshold = 12;  // per key: total bytes / 16 + operations
  o.shared_dirs[kOwner] = dir_;
  auto cert = *IssueCertificate(id, "EMU-1", ca, ca_der, false, 1);
  gpu_ = std::make_unique<EmulatedGpu>(o, std::move(id), cert);
  gpu_->SetOwner(kOwner);
  Establish();
  v1::AttachBounceRequest ab;
  ab.set_path(bounce_->path());
  ab.set_slots(4);
  ab.set_slot_size(4096);
  bounce_id_ = *gpu_->AttachBounce(kOwner, ab);
  buffer_ = Alloc(4096);
  // 64 bytes = 4 + 1 = 5 units each: after two, 10; the third is done and
  // crosses 12 (15); the fourth is refused. (Bytes alone, 4 each, would
  // accept the fourth: 12 is not past 12.)
  for (uint32_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1 + i, i, 64 * i,
                                              std::string(64, 'a' + i))).ok()) << i;
  }
  auto st = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 4, 3, 192, std::string(64, 'd')));
  EXPECT_EQ(st.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(st.status().message().find("H2D key at 15 of 12"), std::string::npos)
      << st.status();
  // The pair rotates together: the D2H key, unused, stops too.
  v1::DeviceCommand rd;
  rd.mutable_read()->set_buffer_id(buffer_);
  rd.mutable_read()->set_length(64);
  auto read = Command(rd);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(read->message().find("both directions"), std::string::npos) << read->message();
  // Another engine's pair is counted on its own; a fresh exchange starts
  // every count again.
  const ChannelMaterial lce1 = *DeriveCopyEngineKey(secret_, 1, true);
  auto on1 = Stage(lce1, 1, 3, 192, std::string(64, 'd'));
  on1.set_copy_engine(1);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, on1).ok());
  Establish();
  bounce_id_ = *gpu_->AttachBounce(kOwner, ab);
  EXPECT_EQ(Read(0, 64), std::string(64, 'a'));

  // Totals, not per-operation rounding: 8-byte chunks count 8/16 = 0 each
  // but 32/16 = 2 over four, so after four the key is at 2 + 4 = 6 > 5.
  o.rotation_threshold = 5;
  auto id2 = *EcKey::Generate(Curve::kP384);
  auto cert2 = *IssueCertificate(id2, "EMU-1", ca, ca_der, false, 1);
  gpu_ = std::make_unique<EmulatedGpu>(o, std::move(id2), cert2);
  gpu_->SetOwner(kOwner);
  Establish();
  bounce_id_ = *gpu_->AttachBounce(kOwner, ab);
  buffer_ = Alloc(4096);
  for (uint32_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1 + i, i, 32 * i,
                                              std::string(8, 'e'))).ok()) << i;
  }
  st = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 5, 0, 128, std::string(8, 'f')));
  EXPECT_EQ(st.status().code(), absl::StatusCode::kResourceExhausted) << st.status();
}

// "Past" the threshold: a key exactly at it still works, and the operation
// after the one that crosses it is refused; the D2H key's use (read-backs)
// stops the H2D direction too.
TEST_F(EmulatedGpuTest, RotationThresholdIsPastNotAtAndCountsTheD2hKey) {
  EmulatedGpuOptions o;
  o.memory_bytes = 1 << 20;
  o.rotation_threshold = 10;
  Restart(o, 4096);
  // 64-byte chunks are 5 units each: 5, 10 (at the threshold), 15.
  for (uint32_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1 + i, i, 64 * i,
                                              std::string(64, 'a' + i))).ok()) << i;
  }
  auto st = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 4, 3, 192, std::string(64, 'd')));
  EXPECT_NE(st.status().message().find("H2D key at 15 of 10"), std::string::npos)
      << st.status();

  // Now the D2H key: 64-byte read-backs, 5 units each, on a fresh session.
  Establish();
  Attach();
  v1::DeviceCommand rd;
  rd.mutable_read()->set_buffer_id(buffer_);
  rd.mutable_read()->set_length(64);
  for (int i = 0; i < 3; ++i) {
    auto r = Command(rd);
    ASSERT_EQ(Code(r), absl::StatusCode::kOk) << i << " " << (r.ok() ? r->message() : "");
    EXPECT_EQ(r->data(), std::string(64, 'a'));
  }
  st = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'x')));
  EXPECT_EQ(st.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(st.status().message().find("D2H key at 15 of 10"), std::string::npos)
      << st.status();
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 1u);
  Establish();
  Attach();
  EXPECT_EQ(Read(0, 64), std::string(64, 'a')) << "the refused chunk wrote nothing";
}

// Read-backs are the copy engine's device-to-host copies: under the
// session's own D2H key (not the H2D key a holder is handed), at the copy
// engine's D2H counter, opened in that order only; each direction has its
// own counter and is spent on its own.
TEST_F(EmulatedGpuTest, ReadBackIsTheCopyEngineD2hCopy) {
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'q'))).ok());
  v1::DeviceCommand rd;
  rd.mutable_read()->set_buffer_id(buffer_);
  rd.mutable_read()->set_length(64);
  auto raw = [&]() {
    v1::SealedMessage req;
    req.set_session_id(session_);
    req.set_ciphertext(
        *control_->Seal(ControlAad(true, session_), rd.SerializeAsString(), nullptr));
    auto resp = *gpu_->Control(kOwner, req);
    v1::DeviceReply r;
    EXPECT_TRUE(r.ParseFromString(*control_->Open(ControlAad(false, session_), resp.ciphertext())));
    return std::make_pair(r, resp.d2h_copy());
  };
  auto [r1, copy1] = raw();
  EXPECT_TRUE(r1.data().empty()) << "no plaintext in the control reply";
  EXPECT_EQ(r1.d2h_counter(), kFirstMessageCounter);
  EXPECT_EQ(r1.d2h_length(), 64u);
  ASSERT_EQ(copy1.size(), 64u + kGcmTagSize);
  EXPECT_EQ(copy1.find(std::string(64, 'q')), std::string::npos) << "the copy is ciphertext";
  // The holder's key (lce00_h2d_user) does not open it.
  D2hReceiver holder;
  holder.cipher = *ChannelCipher::Create(keys_.lce_h2d);
  v1::DeviceReply tmp = r1;
  EXPECT_EQ(holder.Open(rd, session_, copy1, &tmp).code(), absl::StatusCode::kDataLoss);
  // Opened in order by the driver's end.
  ASSERT_TRUE(d2h_.Open(rd, session_, copy1, &r1).ok());
  EXPECT_EQ(r1.data(), std::string(64, 'q'));
  auto [r2, copy2] = raw();
  EXPECT_EQ(r2.d2h_counter(), kFirstMessageCounter + 1);
  // Replayed or reordered copies do not open; the counter stays for the right one.
  v1::DeviceReply again = r1;
  EXPECT_EQ(d2h_.Open(rd, session_, copy1, &again).code(), absl::StatusCode::kDataLoss);
  // Nor does a copy of another range than the one asked for.
  v1::DeviceCommand other = rd;
  other.mutable_read()->set_offset(32);
  v1::DeviceReply moved = r2;
  EXPECT_EQ(d2h_.Open(other, session_, copy2, &moved).code(), absl::StatusCode::kDataLoss);
  ASSERT_TRUE(d2h_.Open(rd, session_, copy2, &r2).ok());
  v1::DeviceCommand q;
  q.mutable_query();
  auto st = Command(q);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->d2h_next_counter(), kFirstMessageCounter + 2);
  EXPECT_EQ(st->d2h_copies(), 2u);
  EXPECT_EQ(st->d2h_bytes(), 128u);
  EXPECT_EQ(st->h2d_next_counter(), kFirstMessageCounter + 1);
  // The last D2H counter carries one copy; then reads are refused until a
  // re-key, while the H2D direction goes on.
  gpu_->SetD2hCounterForTest(kLastMessageCounter);
  d2h_.next = kLastMessageCounter;
  EXPECT_EQ(Read(0, 64), std::string(64, 'q'));
  auto spent = Command(rd);
  ASSERT_TRUE(spent.ok()) << spent.status();
  EXPECT_EQ(spent->code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 2, 1, 64, std::string(64, 'r'))).ok());
  Establish();
  EXPECT_EQ(Read(64, 64), std::string(64, 'r')) << "a fresh session has fresh counters";
}

// Each of the eight copy engines has its own H2D and D2H key slots, with their
// own counters and exhaustion: a chunk opens only on the engine whose key
// made it (the holder's LCE0 key opens nothing on LCE1), engines count
// independently, read-backs leave under the named engine's D2H key, and a
// re-key kills every engine's keys.
// IV rotation (RotateIvCommand) of one key slot: its channel counter goes
// up, its message counter starts again and its exhaustion is lifted; the
// old IV space is closed; the key and its use stay; other slots are
// untouched; the last channel counter is never passed.
TEST_F(EmulatedGpuTest, IvRotationStartsAFreshIvSpaceInOneSlot) {
  auto rotate = [this](uint32_t engine, bool h2d) {
    v1::DeviceCommand c;
    c.mutable_rotate_iv()->set_copy_engine(engine);
    c.mutable_rotate_iv()->set_h2d(h2d);
    auto r = Command(c);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::DeviceReply();
  };
  const std::string a(64, 'a'), c(64, 'c');
  // H2D: the last counter carries one chunk, then nothing lands.
  gpu_->SetH2dCounterForTest(kLastMessageCounter);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, kLastMessageCounter, 0, 0, a)).ok());
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 1, 64, c)).status().code(),
            absl::StatusCode::kResourceExhausted);
  v1::DeviceReply r = rotate(0, true);
  ASSERT_EQ(r.code(), 0) << r.message();
  EXPECT_EQ(r.h2d_channel_counter(), 1u);
  EXPECT_EQ(r.h2d_next_counter(), kFirstMessageCounter);
  // The old IV space is closed: its first counter (never used) and its last
  // one are refused; the new space's first counter lands.
  for (uint32_t counter : {kFirstMessageCounter, kLastMessageCounter}) {
    EXPECT_EQ(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, counter, 1, 64, c)).status().code(),
              absl::StatusCode::kUnauthenticated)
        << "counter " << counter << " of channel 0";
  }
  ChannelMaterial channel1 = keys_.lce_h2d.Clone();
  channel1.channel_counter = 1;
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(channel1, 1, 1, 64, c)).ok());
  EXPECT_EQ(Read(0, 128), a + c);
  v1::DeviceCommand query;
  query.mutable_query();
  auto q = Command(query);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->h2d_channel_counter(), 1u);
  EXPECT_EQ(q->h2d_next_counter(), 2u);
  EXPECT_EQ(q->h2d_chunks(), 2u) << "the key's use carries over (key rotation counts it)";
  EXPECT_EQ(q->d2h_channel_counter(), 0u) << "each slot has its own IV";

  // D2H: likewise, and this end follows the rotation.
  gpu_->SetD2hCounterForTest(kLastMessageCounter);
  d2h_.next = kLastMessageCounter;
  EXPECT_EQ(Read(0, 64), a);  // the last counter
  v1::DeviceCommand rd;
  rd.mutable_read()->set_buffer_id(buffer_);
  rd.mutable_read()->set_length(64);
  auto spent = Command(rd);
  ASSERT_TRUE(spent.ok()) << spent.status();
  EXPECT_EQ(spent->code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  r = rotate(0, false);
  ASSERT_EQ(r.code(), 0) << r.message();
  EXPECT_EQ(r.d2h_channel_counter(), 1u);
  EXPECT_EQ(r.d2h_next_counter(), kFirstMessageCounter);
  D2hReceiver stale = *D2hReceiver::Create(keys_.lce_d2h.Clone());  // channel 0, counter 1
  ASSERT_TRUE(d2h_.Rotate(r.d2h_channel_counter()).ok());
  EXPECT_EQ(Read(0, 64), a);
  EXPECT_EQ(d2h_.next, 2u);
  // The channel-0 receiver cannot open the copy made at the same message
  // counter of channel 1.
  std::swap(d2h_, stale);
  r = rotate(0, false);  // channel 2, counter 1: the stale receiver's counter
  auto unopened = Command(rd);
  EXPECT_EQ(unopened.status().code(), absl::StatusCode::kDataLoss) << unopened.status();
  std::swap(d2h_, stale);
  ASSERT_TRUE(d2h_.Rotate(2).ok());
  d2h_.next = 2;  // the copy the stale receiver could not open used counter 1

  // Another engine's slots are its own; an engine the GPU lacks is refused.
  EXPECT_EQ(rotate(3, true).h2d_channel_counter(), 1u);
  q = Command(query);
  EXPECT_EQ(q->h2d_channel_counter(), 1u);
  EXPECT_EQ(rotate(kCopyEngines, true).code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));

  // At the last channel counter the IV cannot be rotated again (a fresh key
  // exchange is needed); the slot goes on in the IV space it has.
  gpu_->SetChannelCounterForTest(std::numeric_limits<uint64_t>::max(), 0, true);
  r = rotate(0, true);
  EXPECT_EQ(r.code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(r.message().find("channel counter"), std::string::npos) << r.message();
  ChannelMaterial last = keys_.lce_h2d.Clone();
  last.channel_counter = std::numeric_limits<uint64_t>::max();
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(last, 2, 2, 128, c)).ok());
  EXPECT_EQ(Read(128, 64), c);
}

TEST_F(EmulatedGpuTest, EachCopyEngineHasItsOwnKeySlots) {
  const ChannelMaterial lce1 = *DeriveCopyEngineKey(secret_, 1, true);
  const ChannelMaterial lce3 = *DeriveCopyEngineKey(secret_, 3, true);
  auto on = [](v1::SubmitH2DRequest r, uint32_t engine) {
    r.set_copy_engine(engine);
    return r;
  };
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, on(Stage(lce1, 1, 0, 0, std::string(64, 'a')), 1)).ok());
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, on(Stage(lce1, 2, 1, 64, std::string(64, 'b')), 1)).ok());
  // LCE0 is untouched and starts at its own first counter.
  auto st = gpu_->Status();
  EXPECT_EQ(st.h2d_next_counter(), kFirstMessageCounter);
  ASSERT_EQ(st.copy_engines_size(), 2);
  EXPECT_EQ(st.copy_engines(0).engine(), 0u);
  EXPECT_EQ(st.copy_engines(1).engine(), 1u);
  EXPECT_EQ(st.copy_engines(1).h2d_next_counter(), 3u);
  EXPECT_EQ(st.copy_engines(1).h2d_chunks(), 2u);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 2, 128, std::string(64, 'c'))).ok());
  EXPECT_EQ(Read(0, 192), std::string(64, 'a') + std::string(64, 'b') + std::string(64, 'c'));

  // A key opens nothing on another engine, whatever the counter.
  const uint64_t rejected = gpu_->Status().rejected_chunks();
  for (uint32_t counter : {2u, 3u}) {
    auto wrong = on(Stage(keys_.lce_h2d, counter, 3, 256, std::string(64, 'x')), 1);
    EXPECT_EQ(gpu_->SubmitH2D(kOwner, wrong).status().code(),
              absl::StatusCode::kUnauthenticated);
  }
  auto lce1_on_0 = Stage(lce1, 2, 3, 256, std::string(64, 'y'));
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, lce1_on_0).status().code(),
            absl::StatusCode::kUnauthenticated);
  auto nowhere = on(Stage(lce1, 3, 3, 256, std::string(64, 'z')), kCopyEngines);
  auto none = gpu_->SubmitH2D(kOwner, nowhere);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument) << none.status();
  EXPECT_EQ(gpu_->Status().rejected_chunks(), rejected + 4);
  EXPECT_EQ(Read(256, 64), std::string(64, '\0')) << "no refused chunk landed";
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 2u);
  EXPECT_EQ(gpu_->Status().copy_engines(1).h2d_next_counter(), 3u);

  // Exhaustion is per engine: LCE3's last counter carries one chunk, then
  // LCE3 refuses while LCE0 goes on.
  gpu_->SetH2dCounterForTest(kLastMessageCounter, 3);
  ASSERT_TRUE(gpu_->SubmitH2D(
      kOwner, on(Stage(lce3, kLastMessageCounter, 0, 256, std::string(64, 'd')), 3)).ok());
  auto spent = gpu_->SubmitH2D(kOwner, on(Stage(lce3, 1, 1, 320, std::string(64, 'e')), 3));
  EXPECT_EQ(spent.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(spent.status().message().find("LCE3"), std::string::npos) << spent.status();
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 2, 1, 320, std::string(64, 'f'))).ok());

  // Read-backs on LCE2 leave under LCE2's D2H key and counter; LCE0's D2H
  // receiver does not take them, nor does LCE0's key open them.
  v1::DeviceCommand rd;
  rd.mutable_read()->set_buffer_id(buffer_);
  rd.mutable_read()->set_length(64);
  rd.mutable_read()->set_copy_engine(2);
  v1::DeviceReply unopened;
  EXPECT_EQ(d2h_.Open(rd, session_, std::string(64 + kGcmTagSize, 'x'), &unopened).code(),
            absl::StatusCode::kInvalidArgument);
  D2hReceiver lce2;
  lce2.engine = 2;
  lce2.cipher = *ChannelCipher::Create(*DeriveCopyEngineKey(secret_, 2, false));
  std::swap(d2h_, lce2);
  auto r = Command(rd);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->data(), std::string(64, 'a'));
  EXPECT_EQ(r->copy_engine(), 2u);
  EXPECT_EQ(r->d2h_counter(), kFirstMessageCounter);
  D2hReceiver forged;
  forged.engine = 2;
  forged.cipher = *ChannelCipher::Create(keys_.lce_d2h);
  forged.next = d2h_.next;
  std::swap(d2h_, forged);
  EXPECT_EQ(Command(rd).status().code(), absl::StatusCode::kDataLoss);
  std::swap(d2h_, forged);
  std::swap(d2h_, lce2);
  v1::DeviceCommand q;
  q.mutable_query()->set_copy_engine(2);
  auto q2 = Command(q);
  ASSERT_TRUE(q2.ok());
  EXPECT_EQ(q2->copy_engine(), 2u);
  EXPECT_EQ(q2->d2h_next_counter(), kFirstMessageCounter + 2);
  EXPECT_EQ(q2->h2d_next_counter(), kFirstMessageCounter);
  q.mutable_query()->set_copy_engine(0);
  auto q0 = Command(q);
  ASSERT_TRUE(q0.ok());
  EXPECT_EQ(q0->d2h_next_counter(), kFirstMessageCounter + 2) << "the two Reads on LCE0";
  EXPECT_EQ(q0->h2d_next_counter(), 3u);
  // An engine the GPU does not have is refused before anything happens: no
  // scrub, even of a scrub that reads nothing back, and no empty read.
  for (uint64_t read_back : {uint64_t{64}, uint64_t{0}}) {
    v1::DeviceCommand bad;
    bad.mutable_scrub()->set_buffer_id(buffer_);
    bad.mutable_scrub()->set_read_back(read_back);
    bad.mutable_scrub()->set_copy_engine(kCopyEngines);
    auto refused = Command(bad);
    ASSERT_TRUE(refused.ok()) << refused.status();
    EXPECT_EQ(refused->code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  }
  v1::DeviceCommand empty_read;
  empty_read.mutable_read()->set_buffer_id(buffer_);
  empty_read.mutable_read()->set_copy_engine(kCopyEngines + 3);
  auto refused = Command(empty_read);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(Read(0, 64), std::string(64, 'a')) << "nothing was scrubbed";

  // A re-key kills every engine's keys: LCE1's old key fails under the new
  // session, and its counter starts over.
  Establish();
  Attach();  // the exchange dropped the old session's rings
  EXPECT_EQ(gpu_->Status().copy_engines_size(), 1);
  auto old = on(Stage(lce1, 1, 0, 0, std::string(64, 'o')), 1);
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, old).status().code(), absl::StatusCode::kUnauthenticated);
  auto fresh = *DeriveCopyEngineKey(secret_, 1, true);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, on(Stage(fresh, 1, 0, 0, std::string(64, 'n')), 1)).ok());
  EXPECT_EQ(Read(0, 64), std::string(64, 'n'));
}

TEST_F(EmulatedGpuTest, BounceRingsDetachedAndDroppedWithTheSession) {
  EXPECT_EQ(gpu_->Status().bounce_buffers(), 1u);
  EXPECT_TRUE(gpu_->DetachBounce(kOwner, bounce_id_).ok());
  EXPECT_EQ(gpu_->DetachBounce(kOwner, bounce_id_).code(), absl::StatusCode::kNotFound);
  v1::AttachBounceRequest ab;
  ab.set_path(bounce_->path());
  ab.set_slots(4);
  ab.set_slot_size(4096);
  ASSERT_TRUE(gpu_->AttachBounce(kOwner, ab).ok());
  EXPECT_EQ(gpu_->Status().bounce_buffers(), 1u);
  Establish();  // a new session drops the old session's rings
  EXPECT_EQ(gpu_->Status().bounce_buffers(), 0u);
}

TEST_F(EmulatedGpuTest, LastDoorbellReleasesTheRingWhateverBecameOfItsChunk) {
  // Accepted chunk: handled, then the ring goes.
  auto r1 = Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'));
  r1.set_release_bounce(true);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, r1).ok());
  EXPECT_EQ(gpu_->Status().bounce_buffers(), 0u);
  EXPECT_EQ(Read(0, 64), std::string(64, 'a'));
  // The ring is gone: a later doorbell on it is refused.
  auto late = Stage(keys_.lce_h2d, 2, 1, 64, std::string(64, 'b'));
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, late).status().code(),
            absl::StatusCode::kInvalidArgument);

  // Refused chunk (bad tag): refused, memory untouched, ring released too.
  Attach();
  auto r2 = Stage(keys_.lce_h2d, 2, 1, 64, std::string(64, 'b'));
  bounce_->tag(1)[0] ^= 1;
  r2.set_release_bounce(true);
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, r2).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(gpu_->Status().bounce_buffers(), 0u);
  EXPECT_EQ(Read(64, 64), std::string(64, '\0'));

  // Another domain cannot release this domain's ring.
  Attach();
  auto r3 = Stage(keys_.lce_h2d, 2, 1, 64, std::string(64, 'b'));
  r3.set_release_bounce(true);
  EXPECT_FALSE(gpu_->SubmitH2D("intruder", r3).ok());  // not the owner
  EXPECT_EQ(gpu_->Status().bounce_buffers(), 1u);
  // Without the flag the ring stays for the next chunk.
  r3.set_release_bounce(false);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, r3).ok());
  EXPECT_EQ(gpu_->Status().bounce_buffers(), 1u);
}

// A holder that truncates its ring while the device maps it gets its chunks
// refused, as a real copy engine takes an IOMMU fault on that channel; it
// does not bring down the device (the SIGBUS stays inside the ring's
// mapping). A SIGBUS anywhere else still stops the process.
TEST_F(EmulatedGpuTest, TruncatedRingIsRefusedAndTheDeviceLivesOn) {
  auto r = Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'));
  ASSERT_EQ(::truncate(bounce_->path().c_str(), 0), 0);
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto st = gpu_->SubmitH2D(kOwner, r);
    EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition) << st.status();
    EXPECT_NE(st.status().message().find("shrank"), std::string::npos) << st.status();
  }
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 1u);
  EXPECT_EQ(Read(0, 64), std::string(64, '\0'));
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
  // The holder's own mapping of the truncated file is not guarded: touching
  // it is the SIGBUS of a real bug, and that still kills. (A forked child,
  // the "fast" style: a re-executed one would run this test's set-up again
  // and leave its directory behind when it dies.)
  EXPECT_DEATH(
      {
        volatile uint8_t x = bounce_->slot(0)[100];
        (void)x;
      },
      "");
  // A new ring, and the same chunk lands.
  bounce_.reset();
  bounce_ = *BounceBuffer::Create(dir_ + "/bounce", 4, 4096);
  Attach();
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'))).ok());
  EXPECT_EQ(Read(0, 64), std::string(64, 'a'));
}

// A one-chunk window's doorbell brings its own ring: mapped, used, released.
TEST_F(EmulatedGpuTest, DoorbellCanBringItsOwnRing) {
  const uint64_t rings = gpu_->Status().bounce_buffers();  // the fixture's
  v1::AttachBounceRequest ab;
  ab.set_path(bounce_->path());
  ab.set_slots(4);
  ab.set_slot_size(4096);

  auto r1 = Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'));
  r1.set_bounce_id(0);  // ignored: the request attaches its ring
  *r1.mutable_attach() = ab;
  r1.set_release_bounce(true);
  uint64_t attached = 99;
  auto n = gpu_->SubmitH2D(kOwner, r1, &attached);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 2u);
  EXPECT_EQ(attached, 0u);  // released again
  EXPECT_EQ(gpu_->Status().bounce_buffers(), rings);
  EXPECT_EQ(Read(0, 64), std::string(64, 'a'));

  // Without release_bounce the ring stays, under the handle returned.
  auto r2 = Stage(keys_.lce_h2d, 2, 1, 64, std::string(64, 'b'));
  *r2.mutable_attach() = ab;
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, r2, &attached).ok());
  ASSERT_NE(attached, 0u);
  EXPECT_EQ(gpu_->Status().bounce_buffers(), rings + 1);
  auto r3 = Stage(keys_.lce_h2d, 3, 2, 128, std::string(64, 'c'));
  r3.set_bounce_id(attached);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, r3).ok());
  EXPECT_EQ(Read(0, 192), std::string(64, 'a') + std::string(64, 'b') + std::string(64, 'c'));

  // A ring that cannot be mapped, or a domain the GPU is not routed to: the
  // chunk is not looked at and consumes nothing.
  const uint64_t rejected = gpu_->Status().rejected_chunks();
  auto r4 = Stage(keys_.lce_h2d, 4, 3, 192, std::string(64, 'd'));
  v1::AttachBounceRequest bad = ab;
  bad.set_path("relative/path");
  *r4.mutable_attach() = bad;
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, r4).status().code(), absl::StatusCode::kInvalidArgument);
  *r4.mutable_attach() = ab;
  EXPECT_EQ(gpu_->SubmitH2D("intruder", r4).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(gpu_->Status().bounce_buffers(), rings + 1);
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 4u);
  EXPECT_EQ(gpu_->Status().rejected_chunks(), rejected);
  // A ring brought by a doorbell whose chunk is refused is unmapped again:
  // its caller never learns its id.
  auto r5 = Stage(keys_.lce_h2d, 4, 3, 192, std::string(64, 'e'));
  *r5.mutable_attach() = ab;
  bounce_->tag(3)[0] ^= 1;
  attached = 99;
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, r5, &attached).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(attached, 0u);
  EXPECT_EQ(gpu_->Status().bounce_buffers(), rings + 1);
  r4 = Stage(keys_.lce_h2d, 4, 3, 192, std::string(64, 'd'));
  *r4.mutable_attach() = ab;
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, r4).ok());  // the same doorbell, rightly sent
  EXPECT_EQ(Read(192, 64), std::string(64, 'd'));
}

// The device reaches only the routed domain's shared memory (the IOMMU's
// rule): a ring elsewhere, reached through "..", a subdirectory or a link,
// or a file that is not a ring is refused before anything is mapped, and a
// domain with no shared memory configured attaches nothing.
TEST_F(EmulatedGpuTest, RingsAreMappedOnlyFromTheRoutedDomainsSharedMemory) {
  const std::string other = MakeTestDir("gputravel-other-");  // another TD's shared memory
  // Removed however the test ends (after the rings below, which remove
  // their own files).
  struct Leftovers {
    std::string dir, other;
    ~Leftovers() {
      for (const char* name : {"/link", "/hard", "/fifo"}) ::unlink((dir + name).c_str());
      ::unlink((other + "/alias").c_str());
      ::rmdir((dir + "/sub").c_str());
      ::rmdir(other.c_str());
    }
  } leftovers{dir_, other};
  auto foreign = *BounceBuffer::Create(other + "/ring", 4, 4096);
  ASSERT_EQ(::mkdir((dir_ + "/sub").c_str(), 0700), 0);
  auto nested = *BounceBuffer::Create(dir_ + "/sub/ring", 4, 4096);
  ASSERT_EQ(::symlink((other + "/ring").c_str(), (dir_ + "/link").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir_ + "/fifo").c_str(), 0600), 0);
  const uint64_t rings = gpu_->Status().bounce_buffers();
  auto attach = [&](const std::string& domain, const std::string& path) {
    v1::AttachBounceRequest ab;
    ab.set_path(path);
    ab.set_slots(4);
    ab.set_slot_size(4096);
    return gpu_->AttachBounce(domain, ab).status();
  };
  for (const std::string& path :
       {other + "/ring", dir_ + "/../" + other.substr(5) + "/ring", dir_ + "/sub/ring",
        dir_ + "/.", dir_ + "/", dir_ + "ring"}) {
    absl::Status st = attach(kOwner, path);
    EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << path << ": " << st;
    EXPECT_NE(st.message().find("shared memory"), std::string::npos) << st.message();
  }
  absl::Status link = attach(kOwner, dir_ + "/link");
  EXPECT_EQ(link.code(), absl::StatusCode::kPermissionDenied) << link;  // not followed
  EXPECT_NE(link.message().find("symbolic link"), std::string::npos) << link;
  EXPECT_EQ(attach(kOwner, dir_ + "//nope").code(), absl::StatusCode::kNotFound)
      << "a doubled slash is the same directory";
  absl::Status fifo = attach(kOwner, dir_ + "/fifo");
  EXPECT_EQ(fifo.code(), absl::StatusCode::kInvalidArgument) << fifo;  // and no hang
  EXPECT_EQ(gpu_->Status().bounce_buffers(), rings);
  // The ring a doorbell brings obeys the same rule, and consumes no counter.
  auto r1 = Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'));
  v1::AttachBounceRequest ab;
  ab.set_path(other + "/ring");
  ab.set_slots(4);
  ab.set_slot_size(4096);
  *r1.mutable_attach() = ab;
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, r1).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 1u);
  // A hard link puts another domain's file in this directory under a name
  // of its own: a ring with more than one name is refused, by either name,
  // until it has one again.
  ASSERT_EQ(::link((other + "/ring").c_str(), (dir_ + "/hard").c_str()), 0);
  ASSERT_EQ(::link(bounce_->path().c_str(), (other + "/alias").c_str()), 0);
  for (const std::string& path : {dir_ + "/hard", bounce_->path()}) {
    absl::Status st = attach(kOwner, path);
    EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << path << ": " << st;
    EXPECT_NE(st.message().find("2 names"), std::string::npos) << st.message();
  }
  ::unlink((other + "/alias").c_str());
  // The domain's own ring is mapped.
  EXPECT_TRUE(attach(kOwner, bounce_->path()).ok());
  EXPECT_EQ(gpu_->Status().bounce_buffers(), rings + 1);
  // A domain with no shared memory: nothing, even for a path in another's.
  gpu_->SetOwner("holder-b");
  absl::Status none = attach("holder-b", bounce_->path());
  EXPECT_EQ(none.code(), absl::StatusCode::kPermissionDenied) << none;
  EXPECT_NE(none.message().find("holder-b"), std::string::npos) << none.message();
}

// The device opens each shared-memory directory once, when it starts: a
// domain that later puts a link to another domain's memory in its place
// still reaches only its own directory, and a directory that was a link (or
// missing) when the device started serves nothing.
TEST(EmulatedGpuSharedMemoryTest, DirectoryIsTheOneOpenedAtStartEvenIfReplaced) {
  const std::string root = MakeTestDir("gputravel-shm-");
  const std::string a = root + "/a", b = root + "/b", gone = root + "/a-before";
  ASSERT_EQ(::mkdir(a.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(b.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(b.c_str(), (root + "/link").c_str()), 0);
  auto ca = *EcKey::Generate(Curve::kP384);
  auto ca_der = *IssueCertificate(ca, "ca", ca, "", true, 1);
  auto id = *EcKey::Generate(Curve::kP384);
  auto cert = *IssueCertificate(id, "EMU-1", ca, ca_der, false, 1);
  EmulatedGpuOptions o;
  o.serial = "EMU-1";
  o.shared_dirs["td-a"] = a;
  o.shared_dirs["td-l"] = root + "/link";
  o.shared_dirs["td-m"] = root + "/missing";
  EmulatedGpu gpu(o, std::move(id), cert);
  auto attach = [&](const std::string& domain, const std::string& path) {
    gpu.SetOwner(domain);
    v1::AttachBounceRequest ab;
    ab.set_path(path);
    ab.set_slots(1);
    ab.set_slot_size(4096);
    return gpu.AttachBounce(domain, ab).status();
  };
  {
    auto mine = *BounceBuffer::Create(a + "/ring", 1, 4096);
    auto theirs = *BounceBuffer::Create(b + "/ring", 1, 4096);
    EXPECT_TRUE(attach("td-a", a + "/ring").ok());
    // td-a swaps its directory for a link to td-b's: the path now names
    // td-b's ring, but the device still looks in td-a's own directory.
    ASSERT_EQ(::rename(a.c_str(), gone.c_str()), 0);
    ASSERT_EQ(::symlink(b.c_str(), a.c_str()), 0);
    absl::Status st = attach("td-a", a + "/ring");
    EXPECT_TRUE(st.ok()) << st;  // its own ring, in the directory it had
    ::unlink((gone + "/ring").c_str());
    st = attach("td-a", a + "/ring");
    EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << "td-b's ring was reached: " << st;
    for (const std::string domain : {"td-l", "td-m"}) {
      st = attach(domain, root + "/link/ring");
      EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << domain << ": " << st;
      EXPECT_NE(st.message().find("when the device started"), std::string::npos) << st;
    }
  }
  ::unlink(a.c_str());
  ::unlink((root + "/link").c_str());
  ::rmdir(gone.c_str());
  ::rmdir(b.c_str());
  ::rmdir(root.c_str());
}

TEST_F(EmulatedGpuTest, HeartbeatMissForcesReset) {
  absl::Time now = absl::FromUnixSeconds(1000);
  auto ca = *EcKey::Generate(Curve::kP384);
  auto ca_der = *IssueCertificate(ca, "ca", ca, "", true, 1);
  auto id = *EcKey::Generate(Curve::kP384);
  EmulatedGpuOptions o;
  o.serial = "EMU-1";
  o.heartbeat_period = absl::Seconds(4);
  o.clock = [&now] { return now; };
  o.shared_dirs[kOwner] = dir_;
  auto cert = *IssueCertificate(id, "EMU-1", ca, ca_der, false, 1);
  gpu_ = std::make_unique<EmulatedGpu>(o, std::move(id), cert);
  gpu_->SetOwner(kOwner);
  Establish();
  Attach();
  buffer_ = Alloc(4096);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'h'))).ok());
  v1::DeviceCommand hb;
  hb.mutable_heartbeat();
  now += absl::Seconds(7);
  ASSERT_TRUE(Command(hb).ok());  // within 2 x period: kept alive
  now += absl::Seconds(7);
  ASSERT_TRUE(Command(hb).ok());
  EXPECT_EQ(gpu_->Status().heartbeats(), 2u);
  // Only the heartbeat command keeps it alive: neither a chunk nor another
  // command does.
  now += absl::Seconds(6);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 2, 1, 64, std::string(64, 'i'))).ok());
  EXPECT_EQ(Read(0, 128), std::string(64, 'h') + std::string(64, 'i'));
  now += absl::Seconds(2);  // exactly two periods: still alive
  EXPECT_FALSE(gpu_->Status().needs_reset());
  EXPECT_FALSE(gpu_->MemoryIsZeroForTest());
  now += absl::Milliseconds(1);  // missed: more than 8 s without a heartbeat
  // The device's own status shows it at once, before anyone calls in, and
  // device memory is wiped then (nothing can read it afterwards to see).
  EXPECT_TRUE(gpu_->Status().needs_reset());
  EXPECT_TRUE(gpu_->MemoryIsZeroForTest());
  auto st = Command(hb);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(st.status().message().find("heartbeat"), std::string::npos);
  EXPECT_EQ(gpu_->Status().heartbeats(), 2u) << "a refused heartbeat is not counted";
  EXPECT_TRUE(gpu_->Status().needs_reset());
  EXPECT_EQ(gpu_->Status().session_id(), 0u);
  // Even a new key exchange is refused until the reset.
  auto eph = *EcKey::Generate(Curve::kP384);
  v1::KeyExchangeRequest req;
  req.set_requester_public_key(eph.PublicPoint());
  req.set_requester_nonce(RandomString(32));
  EXPECT_FALSE(gpu_->KeyExchange(kOwner, req).ok());
  gpu_->Reset();
  EXPECT_FALSE(gpu_->Status().needs_reset());
  Establish();
  EXPECT_GT(session_, 0u);
}

// Nobody calls the device after its last heartbeat: it still wipes the
// session and memory soon after two periods (its own watchdog, every quarter
// period), not only at the next call. A short period keeps the test short.
TEST_F(EmulatedGpuTest, MissedHeartbeatWipesWithoutAnyCall) {
  auto ca = *EcKey::Generate(Curve::kP384);
  auto ca_der = *IssueCertificate(ca, "ca", ca, "", true, 1);
  auto id = *EcKey::Generate(Curve::kP384);
  EmulatedGpuOptions o;
  o.serial = "EMU-1";
  o.heartbeat_period = absl::Milliseconds(500);
  o.shared_dirs[kOwner] = dir_;
  auto cert = *IssueCertificate(id, "EMU-1", ca, ca_der, false, 1);
  gpu_ = std::make_unique<EmulatedGpu>(o, std::move(id), cert);
  gpu_->SetOwner(kOwner);
  Establish();
  Attach();
  buffer_ = Alloc(4096);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'w'))).ok());
  v1::DeviceCommand hb;  // the last heartbeat: 1 s from here
  hb.mutable_heartbeat();
  ASSERT_TRUE(Command(hb).ok());
  EXPECT_FALSE(gpu_->NeedsResetWithoutCheckingForTest());
  EXPECT_FALSE(gpu_->MemoryIsZeroForTest());
  bool wiped = false;
  for (int i = 0; i < 250 && !wiped; ++i) {  // 1 s + a quarter period, give or take
    absl::SleepFor(absl::Milliseconds(20));
    wiped = gpu_->NeedsResetWithoutCheckingForTest();
  }
  EXPECT_TRUE(wiped) << "no call came in, and the watchdog did not apply the rule";
  EXPECT_TRUE(gpu_->MemoryIsZeroForTest());
  EXPECT_EQ(gpu_->Status().session_id(), 0u);
}

// Property: random interleavings of valid and invalid chunks never let an
// invalid one change device memory, and valid ones land exactly. Between
// chunks the driver re-keys, rotates the IV and runs LCE0's IV space to its
// end now and then, so dead sessions, old IV spaces and an exhausted slot
// are among what is tried.
TEST_F(EmulatedGpuTest, InvalidChunksNeverChangeMemory) {
  constexpr int kKinds = 16;
  std::mt19937 rng(12345);
  std::string expected(8192, '\0');
  // A second buffer that no chunk is meant for: redirected ones must not land.
  const uint64_t mine = buffer_;
  const uint64_t other_buffer = Alloc(4096);
  auto read_buffer = [this](uint64_t id, uint64_t len) {
    const uint64_t keep = buffer_;
    buffer_ = id;
    std::string got = Read(0, len);
    buffer_ = keep;
    return got;
  };
  // The model of LCE0's H2D slot: the key at the channel counter in force,
  // the counter due, and whether the IV space is spent.
  ChannelMaterial cur = keys_.lce_h2d.Clone();
  uint32_t next = kFirstMessageCounter;
  bool exhausted = false;
  int rotations = 0;  // since the last re-key
  ChannelMaterial wrong = keys_.lce_h2d.Clone();
  RandomBytes(wrong.key.data(), 32);
  std::vector<ChannelMaterial> engines;  // LCE1..LCE7's H2D keys
  // The session before the last re-key, with its LCE0 key: dead.
  ChannelMaterial old;
  uint64_t old_session = 0;
  int rekeys = 0, total_rotations = 0, spent = 0, refused_as_spent = 0;
  auto rekey = [&] {
    old = cur.Clone();
    old_session = session_;
    Establish();
    Attach();  // the old session's ring went with it
    cur = keys_.lce_h2d.Clone();
    next = kFirstMessageCounter;
    exhausted = false;
    rotations = 0;
    engines.clear();
    for (uint32_t e = 1; e < kCopyEngines; ++e) {
      engines.push_back(*DeriveCopyEngineKey(secret_, e, true));
    }
    ++rekeys;
  };
  rekey();  // so that a dead session exists from the first step
  int seen[kKinds] = {0};
  for (int step = 0; step < 960; ++step) {
    if (rng() % 80 == 0) {
      rekey();
    } else if (rng() % 40 == 0 || (exhausted && rng() % 4 == 0)) {
      v1::DeviceCommand c;
      c.mutable_rotate_iv()->set_h2d(true);
      auto rotated = Command(c);
      ASSERT_TRUE(rotated.ok() && rotated->code() == 0) << "step " << step;
      ++cur.channel_counter;
      next = kFirstMessageCounter;
      exhausted = false;
      ++rotations;
      ++total_rotations;
    } else if (!exhausted && rng() % 60 == 0) {
      next = kLastMessageCounter - rng() % 3;  // close to the end of the IV space
      gpu_->SetH2dCounterForTest(next);
    }
    uint64_t off = (rng() % (8192 / 32)) * 32;
    uint32_t len = 32 * (1 + rng() % 8);
    if (off + len > 8192) off = 8192 - len;
    std::string data(len, static_cast<char>('A' + rng() % 26));
    uint32_t slot = rng() % 4;
    int kind = rng() % kKinds;
    v1::SubmitH2DRequest r;
    switch (kind) {
      case 0:  // valid (refused only once the IV space is spent)
      case 1:
        r = Stage(cur, next, slot, off, data);
        break;
      case 2:  // replay of a used counter
        r = Stage(cur, next > 1 ? next - 1 : next + 1, slot, off, data);
        break;
      case 3:  // skipping ahead (past the last counter, wrapping to a used one)
        r = Stage(cur, next + 1 + rng() % 5, slot, off, data);
        break;
      case 4:  // wrong key
        r = Stage(wrong, next, slot, off, data);
        break;
      case 5: {  // tampered ciphertext after staging
        r = Stage(cur, next, slot, off, data);
        bounce_->slot(slot)[rng() % len] ^= 0x40;
        break;
      }
      case 6: {  // redirected
        r = Stage(cur, next, slot, off, data);
        r.set_offset(off == 0 ? 32 : off - 32);
        break;
      }
      case 7: {  // misaligned destination, or misaligned tag address; the
                 // tag is right for what is claimed, so only the rule refuses
        if (rng() % 3 == 0 && slot < 3) {
          r = Stage(cur, next, slot, off, data);
          const uint64_t shift = 1 + rng() % 15;
          uint8_t tag[16];
          std::memcpy(tag, bounce_->tag(slot), 16);
          std::memcpy(bounce_->tag(slot) + shift, tag, 16);  // into the next slot's place
          r.set_tag_offset(r.tag_offset() + shift);
          break;
        }
        const uint64_t at = std::min<uint64_t>(off, 8192 - 64 - 32) + 1 + rng() % 31;
        r = Stage(cur, next, slot, at, data + data);  // crosses a 32 B boundary
        break;
      }
      case 8: {  // a session that is not the device's
        r = Stage(cur, next, slot, off, data);
        r.set_session_id(session_ + 1 + rng() % 3);
        break;
      }
      case 9: {  // another copy engine: LCE0's chunk on it, its key on LCE0, or none
        const uint32_t e = 1 + rng() % (kCopyEngines - 1);
        switch (rng() % 3) {
          case 0:
            r = Stage(cur, next, slot, off, data);
            r.set_copy_engine(e);
            break;
          case 1:
            r = Stage(engines[e - 1], next, slot, off, data);
            break;
          default:
            r = Stage(cur, next, slot, off, data);
            r.set_copy_engine(kCopyEngines + rng() % 4);
            break;
        }
        break;
      }
      case 10: {  // longer than its slot, or past the end of the buffer, with
                  // a tag that is right for it
        if (rng() % 2) {
          r = Stage(cur, next, 0, 0, std::string(4096 + 32, data[0]));
        } else {
          r = Stage(cur, next, slot, 8192 - 32, std::string(64, data[0]));
        }
        break;
      }
      case 11: {  // at the counter due, but in another IV space of LCE0: the
                  // one before the last rotation, or the next one
        ChannelMaterial other = cur.Clone();
        other.channel_counter = cur.channel_counter > 0 && rng() % 2 ? cur.channel_counter - 1
                                                                      : cur.channel_counter + 1;
        r = Stage(other, next, slot, off, data);
        break;
      }
      case 12: {  // a slot outside the ring, or an empty chunk, tag right for it
        if (rng() % 2) {
          r = Stage(cur, next, 0, off, data);
          r.set_slot(rng() % 2 ? 4 : std::numeric_limits<uint32_t>::max() - rng() % 4);
        } else {
          r = Stage(cur, next, slot, off, "");
        }
        break;
      }
      case 13: {  // tampered tag
        r = Stage(cur, next, slot, off, data);
        bounce_->tag(slot)[rng() % 16] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      }
      case 14: {  // claims another length, or the other buffer
        r = Stage(cur, next, slot, off, data);
        if (rng() % 2) {
          r.set_length(len == 32 ? 64 : len - 32);
        } else {
          r.set_buffer_id(other_buffer);
          r.set_offset(off % 4096);
        }
        break;
      }
      default: {  // the key from before the last re-key: with its own session
                  // (dead) or claiming the current one
        if (rng() % 2) {
          const uint64_t current = session_;
          session_ = old_session;  // the AAD the dead session's chunk had
          r = Stage(old, next, slot, off, data);
          session_ = current;
          r.set_session_id(old_session);
        } else {
          r = Stage(old, next, slot, off, data);
        }
        break;
      }
    }
    ++seen[kind];
    auto st = gpu_->SubmitH2D(kOwner, r);
    if (kind <= 1 && !exhausted) {
      ASSERT_TRUE(st.ok()) << st.status() << " at step " << step;
      expected.replace(off, len, data);
      if (next == kLastMessageCounter) {
        exhausted = true;  // the counter does not wrap
        ++spent;
      } else {
        ++next;
      }
    } else {
      ASSERT_FALSE(st.ok()) << "kind " << kind << " at step " << step;
      if (kind <= 1) {
        EXPECT_EQ(st.status().code(), absl::StatusCode::kResourceExhausted) << st.status();
        ++refused_as_spent;
      }
    }
    // After every step, not only at the end: a later valid chunk must not
    // be able to hide what an invalid one wrote.
    ASSERT_EQ(gpu_->Status().h2d_next_counter(), next) << "step " << step;
    ASSERT_TRUE(Read(0, 8192) == expected) << "kind " << kind << " at step " << step;
    ASSERT_TRUE(read_buffer(other_buffer, 4096) == std::string(4096, '\0'))
        << "kind " << kind << " at step " << step;
  }
  for (int k = 0; k < kKinds; ++k) EXPECT_GT(seen[k], 10) << "kind " << k;
  EXPECT_GT(rekeys, 5);
  EXPECT_GT(total_rotations, 5);
  EXPECT_GT(spent, 2);
  EXPECT_GT(refused_as_spent, 0);
  EXPECT_EQ(buffer_, mine);
  v1::DeviceCommand query;
  query.mutable_query();
  EXPECT_EQ(Command(query)->h2d_channel_counter(), static_cast<uint64_t>(rotations));
  // The other engines took nothing either.
  const v1::DeviceStatus status = gpu_->Status();
  for (const auto& ce : status.copy_engines()) {
    if (ce.engine() == 0) continue;
    EXPECT_EQ(ce.h2d_next_counter(), kFirstMessageCounter) << "LCE" << ce.engine();
    EXPECT_EQ(ce.h2d_chunks(), 0u) << "LCE" << ce.engine();
  }
}

}  // namespace
}  // namespace gputravel

namespace gputravel {
namespace {

// Another party's session with the device: its own key, its own exchange.
struct Stranger {
  std::unique_ptr<SealedChannel> control;
  uint64_t session = 0;
};

absl::StatusOr<Stranger> ExchangeAsStranger(EmulatedGpu* gpu, const std::string& domain) {
  auto eph = *EcKey::Generate(Curve::kP384);
  v1::KeyExchangeRequest req;
  req.set_requester_public_key(eph.PublicPoint());
  req.set_requester_nonce(RandomString(32));
  auto resp = gpu->KeyExchange(domain, req);
  if (!resp.ok()) return resp.status();
  // A stranger need not check the device's signature: it only wants keys.
  auto keys = DeriveDeviceSessionKeys(*eph.DeriveSharedSecret(resp->device_public_key()),
                                      ExchangeTranscript("EMU-1", req, *resp));
  if (!keys.ok()) return keys.status();
  Stranger out;
  out.control = *SealedChannel::Create(keys->gsp_h2d, keys->gsp_d2h);
  out.session = resp->session_id();
  return out;
}

// A Read of `buffer` under the stranger's session: the device's sealed reply.
v1::DeviceReply StrangerRead(EmulatedGpu* gpu, const std::string& domain, Stranger* st,
                             uint64_t buffer) {
  v1::DeviceCommand cmd;
  cmd.mutable_read()->set_buffer_id(buffer);
  cmd.mutable_read()->set_length(64);
  v1::SealedMessage req;
  req.set_session_id(st->session);
  req.set_ciphertext(
      *st->control->Seal(ControlAad(true, st->session), cmd.SerializeAsString(), nullptr));
  auto resp = gpu->Control(domain, req);
  EXPECT_TRUE(resp.ok()) << resp.status();
  v1::DeviceReply r;
  if (!resp.ok()) return r;
  auto plain = st->control->Open(ControlAad(false, st->session), resp->ciphertext());
  EXPECT_TRUE(plain.ok());
  if (plain.ok()) r.ParseFromString(*plain);
  return r;
}

// P1: the host routes the GPU to a domain it controls while a holder's data
// is in device memory and exchanges keys there: the exchange works (the
// host decides the routing), but it finds no buffer to read.
TEST_F(EmulatedGpuTest, KeyExchangeFromAnotherDomainFindsNoBuffer) {
  const std::string secret(64, 'S');
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, secret)).ok());
  const uint64_t wipes = gpu_->Status().memory_wipes();
  gpu_->SetOwner("host-controlled-vm");
  auto st = ExchangeAsStranger(gpu_.get(), "host-controlled-vm");
  ASSERT_TRUE(st.ok()) << st.status();
  v1::DeviceReply r = StrangerRead(gpu_.get(), "host-controlled-vm", &*st, buffer_);
  EXPECT_EQ(r.code(), static_cast<int>(absl::StatusCode::kNotFound)) << r.message();
  EXPECT_EQ(gpu_->Status().buffers(), 0u);
  EXPECT_EQ(gpu_->Status().memory_wipes(), wipes + 1);
  EXPECT_TRUE(gpu_->MemoryIsZeroForTest());
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
}

// The same from the domain the GPU is routed to (a holder during its trip,
// or the orchestrator's TD after a restart lost its keys): without the
// session owner's authorisation, memory is wiped.
TEST_F(EmulatedGpuTest, KeyExchangeWithoutAuthorisationFindsNoBuffer) {
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'S'))).ok());
  auto st = ExchangeAsStranger(gpu_.get(), kOwner);
  ASSERT_TRUE(st.ok()) << st.status();
  v1::DeviceReply r = StrangerRead(gpu_.get(), kOwner, &*st, buffer_);
  EXPECT_EQ(r.code(), static_cast<int>(absl::StatusCode::kNotFound)) << r.message();
  EXPECT_TRUE(gpu_->MemoryIsZeroForTest());
}

// The owner's re-key, authorised under the session in force, keeps memory.
TEST_F(EmulatedGpuTest, OwnersAuthorisedRekeyKeepsMemory) {
  const std::string data(64, 'K');
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, data)).ok());
  const uint64_t wipes = gpu_->Status().memory_wipes();
  Establish(/*keep=*/true);
  EXPECT_EQ(Read(0, 64), data);
  EXPECT_EQ(gpu_->Status().memory_wipes(), wipes);
}

// The authorisation names one exchange: a relay that swaps the requester's
// key or nonce under it (to run its own exchange with the owner's
// authorisation) gets a wiped device.
TEST_F(EmulatedGpuTest, AuthorisationForAnotherKeyOrNonceKeepsNothing) {
  for (bool swap_key : {true, false}) {
    SCOPED_TRACE(swap_key ? "key swapped" : "nonce swapped");
    buffer_ = Alloc(4096);
    Attach();
    ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'S'))).ok());
    auto eph = *EcKey::Generate(Curve::kP384);
    v1::KeyExchangeRequest req;
    req.set_requester_public_key(eph.PublicPoint());
    req.set_requester_nonce(RandomString(32));
    RideOn(&req, v1::DeviceCommand(), /*keep=*/true);
    if (swap_key) {
      req.set_requester_public_key((*EcKey::Generate(Curve::kP384)).PublicPoint());
    } else {
      req.set_requester_nonce(RandomString(32));
    }
    auto resp = gpu_->KeyExchange(kOwner, req);
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_EQ(resp->prior_error_code(), 0);
    EXPECT_FALSE(resp->memory_kept());
    EXPECT_EQ(gpu_->Status().buffers(), 0u);
    EXPECT_TRUE(gpu_->MemoryIsZeroForTest());
    Establish(/*keep=*/false);  // a session of our own again
  }
}

// keep_memory rides only on a key exchange: Control refuses it (sealed).
TEST_F(EmulatedGpuTest, ControlRefusesKeepMemory) {
  v1::DeviceCommand cmd;
  cmd.mutable_query();
  cmd.mutable_keep_memory()->set_requester_public_key("x");
  auto r = Command(cmd);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code(), static_cast<int>(absl::StatusCode::kInvalidArgument)) << r->message();
}

// Item 2 of the exchange's binding: a relay that strips the riding command,
// answers it itself, splits it from its reply or flips memory_kept makes the
// requester's transcript differ from the one the device signed.
TEST_F(EmulatedGpuTest, SignedTranscriptBindsWhatRodeOnTheExchange) {
  auto identity = VerifyCertificate(cert_der_, ca_der_);
  ASSERT_TRUE(identity.ok()) << identity.status();
  v1::DeviceCommand read;
  read.mutable_read()->set_buffer_id(buffer_);
  read.mutable_read()->set_length(64);
  auto fresh = [&] {
    auto eph = *EcKey::Generate(Curve::kP384);
    v1::KeyExchangeRequest req;
    req.set_requester_public_key(eph.PublicPoint());
    req.set_requester_nonce(RandomString(32));
    RideOn(&req, read, /*keep=*/true);
    return req;
  };
  auto verifies = [&](const v1::KeyExchangeRequest& sent, const v1::KeyExchangeResponse& got) {
    return identity->public_key.Verify(ExchangeTranscript("EMU-1", sent, got),
                                       got.signature_der()).ok();
  };
  // Untouched: verifies.
  v1::KeyExchangeRequest req = fresh();
  auto resp = gpu_->KeyExchange(kOwner, req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_TRUE(verifies(req, *resp));
  // The reply split off (delivered elsewhere), or turned into an error.
  v1::KeyExchangeResponse split = *resp;
  split.clear_prior_reply();
  EXPECT_FALSE(verifies(req, split));
  v1::KeyExchangeResponse as_error = split;
  as_error.set_prior_error_code(static_cast<int>(absl::StatusCode::kNotFound));
  as_error.set_prior_error("no such buffer");
  EXPECT_FALSE(verifies(req, as_error));
  // memory_kept flipped.
  v1::KeyExchangeResponse flipped = *resp;
  flipped.set_memory_kept(!flipped.memory_kept());
  EXPECT_FALSE(verifies(req, flipped));
  // The command stripped from the request before the device saw it.
  Establish(/*keep=*/true);
  req = fresh();
  v1::KeyExchangeRequest stripped = req;
  stripped.clear_prior_command();
  resp = gpu_->KeyExchange(kOwner, stripped);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_FALSE(resp->memory_kept());
  EXPECT_FALSE(verifies(req, *resp));
}

}  // namespace
}  // namespace gputravel

namespace gputravel {
namespace {

// ATTACK (host, racing the owner's re-key): the host relays the owner's
// authorised re-key (keep_memory) and, while the device is between the two
// halves of that exchange (the old session ended, memory kept, the new
// session not installed yet), sends an exchange of its own with a requester
// key that is not on the curve. That exchange wipes device memory and then
// fails, leaving nothing behind; the owner's exchange then completes and the
// device signs memory_kept = true in its transcript, while the owner's
// buffers are gone under the very session that transcript established.
// Secure behaviour: a device-signed memory_kept = true means the memory is
// there (or the owner's exchange fails and has to be made again).
TEST_F(EmulatedGpuTest, SignedMemoryKeptIsTrueOnlyIfMemoryWasKept) {
  const std::string data(64, 'K');
  int raced = 0;
  for (int attempt = 0; attempt < 100 && raced == 0; ++attempt) {
    Establish(/*keep=*/false);  // a fresh session of our own, memory wiped
    buffer_ = Alloc(4096);
    Attach();
    ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, data)).ok());
    const uint64_t wipes = gpu_->Status().memory_wipes();

    // The owner's authorised re-key, on its own thread.
    auto eph = *EcKey::Generate(Curve::kP384);
    v1::KeyExchangeRequest req;
    req.set_requester_public_key(eph.PublicPoint());
    req.set_requester_nonce(RandomString(32));
    RideOn(&req, v1::DeviceCommand(), /*keep=*/true);
    absl::StatusOr<v1::KeyExchangeResponse> resp = absl::UnknownError("not run");
    std::atomic<bool> done{false};
    std::thread owner([&] {
      resp = gpu_->KeyExchange(kOwner, req);
      done = true;
    });
    // The host waits for the gap (no session, nothing wiped yet) ...
    bool in_gap = false;
    while (!done && !in_gap) {
      v1::DeviceStatus st = gpu_->Status();
      in_gap = st.session_id() == 0 && st.memory_wipes() == wipes;
    }
    // ... and slips in its own exchange, which fails after its first half.
    if (in_gap) {
      v1::KeyExchangeRequest bad;
      std::string point = (*EcKey::Generate(Curve::kP384)).PublicPoint();
      point.back() ^= 1;  // not on the curve: the ECDH fails after the wipe
      bad.set_requester_public_key(point);
      bad.set_requester_nonce(RandomString(32));
      EXPECT_FALSE(gpu_->KeyExchange(kOwner, bad).ok());
    }
    owner.join();
    if (!in_gap) continue;
    if (!resp.ok()) {
      raced++;  // the owner's exchange failed: it makes a new one, nothing is claimed
      break;
    }
    if (gpu_->Status().session_id() != resp->session_id()) continue;  // host came after
    raced++;
    // The owner's session is in force, signed by the device; adopt it.
    std::string t = ExchangeTranscript("EMU-1", req, *resp);
    secret_ = *DeviceSessionSecret(*eph.DeriveSharedSecret(resp->device_public_key()), t);
    keys_ = *ExpandDeviceSessionKeys(secret_);
    control_ = *SealedChannel::Create(keys_.gsp_h2d, keys_.gsp_d2h);
    d2h_ = *D2hReceiver::Create(keys_.lce_d2h.Clone());
    session_ = resp->session_id();
    if (resp->memory_kept()) {
      v1::DeviceCommand c;
      c.mutable_read()->set_buffer_id(buffer_);
      c.mutable_read()->set_length(64);
      auto r = Command(c);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->code(), 0)
          << "the device signed memory_kept = true for session " << session_
          << " but under that session the buffer is gone: " << r->message()
          << " (memory_wipes " << wipes << " -> " << gpu_->Status().memory_wipes() << ")";
      EXPECT_EQ(r->data(), data);
    }
  }
  EXPECT_GT(raced, 0) << "the host's exchange never landed between the halves of the owner's";
}

}  // namespace
}  // namespace gputravel

namespace gputravel {
namespace {

// ATTACK (host replays an old authorisation; the defence holds): the host
// recorded the owner's authorised re-key request (keep_memory for its key
// and nonce) and replays the whole request after that re-key went through.
// The authorisation was sealed under a session that has ended: the replayed
// exchange keeps nothing, and memory is wiped.
TEST_F(EmulatedGpuTest, ReplayedAuthorisedRekeyKeepsNothing) {
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'R'))).ok());
  auto eph = *EcKey::Generate(Curve::kP384);
  v1::KeyExchangeRequest req;
  req.set_requester_public_key(eph.PublicPoint());
  req.set_requester_nonce(RandomString(32));
  RideOn(&req, v1::DeviceCommand(), /*keep=*/true);
  auto first = gpu_->KeyExchange(kOwner, req);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->memory_kept());
  EXPECT_EQ(gpu_->Status().buffers(), 1u);
  // The same request again, byte for byte.
  auto replayed = gpu_->KeyExchange(kOwner, req);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  EXPECT_NE(replayed->prior_error_code(), 0);
  EXPECT_FALSE(replayed->memory_kept());
  EXPECT_EQ(gpu_->Status().buffers(), 0u);
  EXPECT_TRUE(gpu_->MemoryIsZeroForTest());
}

// ATTACK (host launders the riding command through Control; the defence
// holds): the host takes the authorisation out of the owner's re-key and
// sends it to Control (refused, sealed, but its counter is used), then
// passes the re-key on: the authorisation no longer opens, memory is wiped
// and the device says so (memory_kept false, the error signed with it).
TEST_F(EmulatedGpuTest, AuthorisationSpentOnControlKeepsNothing) {
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'L'))).ok());
  auto eph = *EcKey::Generate(Curve::kP384);
  v1::KeyExchangeRequest req;
  req.set_requester_public_key(eph.PublicPoint());
  req.set_requester_nonce(RandomString(32));
  RideOn(&req, v1::DeviceCommand(), /*keep=*/true);
  auto laundered = gpu_->Control(kOwner, req.prior_command());
  ASSERT_TRUE(laundered.ok()) << laundered.status();
  EXPECT_EQ(gpu_->Status().buffers(), 1u) << "Control keeps or wipes nothing";
  auto resp = gpu_->KeyExchange(kOwner, req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_NE(resp->prior_error_code(), 0);
  EXPECT_FALSE(resp->memory_kept());
  EXPECT_EQ(gpu_->Status().buffers(), 0u);
  EXPECT_TRUE(gpu_->MemoryIsZeroForTest());
}

}  // namespace
}  // namespace gputravel
