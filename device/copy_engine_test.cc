// The emulated copy engine decrypts outside the device lock: the device stays
// responsive during a decryption, a chunk whose session, memory or route
// changed meanwhile is discarded and changes nothing, and no plaintext is
// left in the decryption scratch once the data's life ends (P2).
#include <atomic>
#include <mutex>
#include <random>
#include <thread>

#include "absl/synchronization/notification.h"
#include "device/bounce_buffer.h"
#include "device/device_memory.h"
#include "keyxfer/device_session.h"
#include "device/emulated_gpu_fixture.h"
#include "gtest/gtest.h"

namespace gputravel {
namespace {

using testing_fixture::EmulatedGpuFixture;
using testing_fixture::kOwner;

class CopyEngineTest : public EmulatedGpuFixture {
 protected:
  // Restarts the device with a hook run between decryption and commit.
  void StartWithHook(std::function<void()> hook) {
    EmulatedGpuOptions o;
    o.copy_engine_hook_for_test = [this, hook] {
      if (hook_armed_.exchange(false)) hook();
    };
    Start(o);
  }
  uint32_t NextCounter() { return gpu_->Status().h2d_next_counter(); }

  std::atomic<bool> hook_armed_{false};
};

TEST_F(CopyEngineTest, ScratchKeepsPlaintextOnlyUntilTheScrub) {
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(4096, 'p'))).ok());
  // Not wiped per chunk (that pass is saved), but device memory holds the
  // same bytes at this point.
  EXPECT_FALSE(gpu_->ScratchIsClearForTest());
  ASSERT_TRUE(Scrub().ok());
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
  EXPECT_EQ(Read(0, kBufferBytes), std::string(kBufferBytes, '\0'));
}

TEST_F(CopyEngineTest, FreeResetAndHeartbeatMissWipeTheScratch) {
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'f'))).ok());
  ASSERT_TRUE(Free().ok());
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());

  buffer_ = Alloc(kBufferBytes);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 2, 1, 0, std::string(64, 'r'))).ok());
  gpu_->Reset();
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());

  absl::Time now = absl::FromUnixSeconds(1000);
  EmulatedGpuOptions o;
  o.heartbeat_period = absl::Seconds(4);
  o.clock = [&now] { return now; };
  Start(o);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'h'))).ok());
  now += absl::Seconds(9);
  EXPECT_FALSE(gpu_->GetIdentity(kOwner).ok());  // the miss is noticed here
  EXPECT_TRUE(gpu_->Status().needs_reset());
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
}

TEST_F(CopyEngineTest, RefusedChunkLeavesNoPlaintextInScratch) {
  // Only the tag is wrong: the decryption itself yields the real plaintext.
  auto r = Stage(keys_.lce_h2d, 1, 0, 0, std::string(4096, 's'));
  bounce_->tag(0)[3] ^= 1;
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, r).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
}

TEST_F(CopyEngineTest, DeviceLockIsFreeWhileDecrypting) {
  // The hook runs on the copy engine's thread between decryption and commit:
  // were the device lock held there, these calls would deadlock.
  bool ran = false;
  StartWithHook([&] {
    EXPECT_EQ(gpu_->Status().owner(), kOwner);
    v1::DeviceCommand q;
    q.mutable_query();
    auto r = Command(q);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->h2d_next_counter(), 1u);  // not committed yet
    gpu_->SetOwner(kOwner);
    ran = true;
  });
  hook_armed_ = true;
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'x'))).ok());
  EXPECT_TRUE(ran);
  EXPECT_EQ(Read(0, 64), std::string(64, 'x'));
}

// Each change that can happen while a chunk is decrypted: the chunk is
// discarded, memory is unchanged, the counter did not move and the scratch
// holds nothing.
TEST_F(CopyEngineTest, ScrubDuringDecryptionDiscardsTheChunk) {
  StartWithHook([&] { ASSERT_TRUE(Scrub().ok()); });
  auto r = Stage(keys_.lce_h2d, 1, 0, 0, std::string(4096, 'a'));
  hook_armed_ = true;
  auto st = gpu_->SubmitH2D(kOwner, r);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.status().message().find("discarded"), std::string::npos) << st.status();
  EXPECT_EQ(Read(0, kBufferBytes), std::string(kBufferBytes, '\0'));
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
  EXPECT_EQ(NextCounter(), 1u);
  EXPECT_EQ(gpu_->Status().rejected_chunks(), 1u);
  // The same chunk, rung again, lands: nothing was consumed.
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, r).ok());
  EXPECT_EQ(Read(0, 4096), std::string(4096, 'a'));
}

// Attack (race the grant against a chunk in the copy engine): the session's
// owner grants LCE0's H2D slot (GrantH2d) while a chunk at the next counter
// is being decrypted outside the device lock. The device accepts the grant
// (its bound is not below next - 1) and says so, so from then on no chunk
// past it may land; the commit must re-check the grant, or a chunk one past
// the window lands after the owner was told the window is closed.
TEST_F(CopyEngineTest, BoundDuringDecryptionRefusesTheChunkPastIt) {
  StartWithHook([&] {
    // Nothing more under this IV space.
    auto r = Grant(0, buffer_, 0, kBufferBytes, 0);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->code(), 0) << r->message();
  });
  hook_armed_ = true;
  auto st = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'k')));
  EXPECT_EQ(st.status().code(), absl::StatusCode::kOutOfRange)
      << "a chunk past the bound in force at its commit landed: " << st.status();
  EXPECT_EQ(Read(0, 64), std::string(64, '\0')) << "the chunk past the bound changed memory";
  EXPECT_EQ(NextCounter(), 1u) << "the chunk past the bound took a counter";
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
}

TEST_F(CopyEngineTest, FreeDuringDecryptionDiscardsTheChunk) {
  StartWithHook([&] { ASSERT_TRUE(Free().ok()); });
  hook_armed_ = true;
  auto st = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a')));
  EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
  EXPECT_EQ(gpu_->Status().buffers(), 0u);
}

TEST_F(CopyEngineTest, RekeyDuringDecryptionDiscardsTheChunk) {
  ChannelMaterial old_key;
  StartWithHook([&] { Establish(); });
  old_key = keys_.lce_h2d.Clone();
  auto r = Stage(old_key, 1, 0, 0, std::string(64, 'k'));
  hook_armed_ = true;
  auto st = gpu_->SubmitH2D(kOwner, r);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Read(0, 64), std::string(64, '\0'));
  EXPECT_EQ(NextCounter(), 1u);  // the new session's counter is untouched
  // The old session's chunk stays dead.
  Attach();  // the old session's ring went with it
  r.set_bounce_id(bounce_id_);
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, r).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Read(0, 64), std::string(64, '\0'));
  EXPECT_EQ(NextCounter(), 1u);
}

// The commit also compares the engine's counter with the one the chunk was
// decrypted at. Nothing in the device moves it meanwhile today (the copy
// engine takes one chunk at a time); the check keeps it so if that changes.
TEST_F(CopyEngineTest, CounterMovedDuringDecryptionDiscardsTheChunk) {
  StartWithHook([&] { gpu_->SetH2dCounterForTest(5); });
  hook_armed_ = true;
  auto st = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'c')));
  EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition) << st.status();
  EXPECT_EQ(Read(0, 64), std::string(64, '\0'));
  EXPECT_EQ(NextCounter(), 5u);
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
}

// A rotation starts the message counter again, so the chunk in flight has
// the counter the engine expects afterwards: only its IV's channel counter
// tells it apart, and it must not land.
TEST_F(CopyEngineTest, IvRotationDuringDecryptionDiscardsTheChunk) {
  StartWithHook([&] {
    v1::DeviceCommand c;
    c.mutable_rotate_iv()->set_h2d(true);
    auto r = Command(c);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->code(), 0) << r->message();
  });
  auto r = Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'v'));
  hook_armed_ = true;
  auto st = gpu_->SubmitH2D(kOwner, r);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition) << st.status();
  EXPECT_EQ(Read(0, 64), std::string(64, '\0'));
  EXPECT_EQ(NextCounter(), 1u);
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
  // Rung again, it is refused by its tag; the new IV space's chunk lands.
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, r).status().code(), absl::StatusCode::kUnauthenticated);
  ChannelMaterial rotated = keys_.lce_h2d.Clone();
  rotated.channel_counter = 1;
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(rotated, 1, 1, 0, std::string(64, 'w'))).ok());
  EXPECT_EQ(Read(0, 64), std::string(64, 'w'));
}

TEST_F(CopyEngineTest, ResetDuringDecryptionDiscardsTheChunk) {
  StartWithHook([&] { gpu_->Reset(); });
  hook_armed_ = true;
  auto st = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'z')));
  EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
  EXPECT_EQ(gpu_->Status().session_id(), 0u);
  EXPECT_EQ(gpu_->Status().buffers(), 0u);
}

TEST_F(CopyEngineTest, RouteChangeDuringDecryptionDiscardsTheChunk) {
  StartWithHook([&] { gpu_->SetOwner("orchestrator"); });
  hook_armed_ = true;
  auto st = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'm')));
  EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition);
  gpu_->SetOwner(kOwner);
  EXPECT_EQ(Read(0, 64), std::string(64, '\0'));
  EXPECT_EQ(NextCounter(), 1u);
}

TEST_F(CopyEngineTest, HeartbeatMissDuringDecryptionDiscardsTheChunk) {
  absl::Time now = absl::FromUnixSeconds(1000);
  EmulatedGpuOptions o;
  o.heartbeat_period = absl::Seconds(4);
  o.clock = [&now] { return now; };
  o.copy_engine_hook_for_test = [&] {
    if (hook_armed_.exchange(false)) now += absl::Seconds(9);
  };
  Start(o);
  hook_armed_ = true;
  auto st = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'b')));
  EXPECT_EQ(st.status().code(), absl::StatusCode::kDataLoss) << "only a reset helps";
  EXPECT_TRUE(gpu_->Status().needs_reset());
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
}

// Submissions from one thread while another scrubs, re-keys, resets, frees
// and reads the status: nothing crashes or deadlocks, and once it is over a
// scrub leaves neither memory nor scratch holding plaintext.
TEST_F(CopyEngineTest, ControlRacingSubmissionsIsSafe) {
  std::mutex mu;  // guards the fixture's session material below
  std::atomic<bool> done{false};
  std::atomic<int> accepted{0}, refused{0};
  std::thread submitter([&] {
    std::mt19937 rng(7);
    uint32_t slot = 0;
    while (!done) {
      v1::SubmitH2DRequest r;
      {
        std::lock_guard<std::mutex> l(mu);
        if (buffer_ == 0) continue;
        const uint32_t len = 32 * (1 + rng() % 128);
        const uint64_t off = (rng() % ((kBufferBytes - len) / 32 + 1)) * 32;
        r = Stage(keys_.lce_h2d, gpu_->Status().h2d_next_counter(), slot, off,
                  std::string(len, static_cast<char>('A' + rng() % 26)));
        slot = (slot + 1) % kSlots;
      }
      (gpu_->SubmitH2D(kOwner, r).ok() ? accepted : refused)++;
    }
  });
  // Stops and joins the submitter however this test ends (an ASSERT below
  // must not leave a joinable thread behind).
  struct JoinOnExit {
    std::atomic<bool>& done;
    std::thread& t;
    ~JoinOnExit() {
      done = true;
      if (t.joinable()) t.join();
    }
  } join_on_exit{done, submitter};
  std::mt19937 rng(11);
  // At least 200 rounds, and on until the submitter has seen both outcomes
  // (bounded), so that the race is really run.
  for (int i = 0; i < 200 || ((accepted == 0 || refused == 0) && i < 20000); ++i) {
    std::this_thread::yield();  // let the submitter in between
    std::lock_guard<std::mutex> l(mu);
    switch (rng() % 5) {
      case 0:
        ASSERT_TRUE(Scrub().ok());
        break;
      case 1:
        Establish();
        Attach();
        break;
      case 2:
        gpu_->Reset();
        Establish();
        Attach();
        buffer_ = Alloc(kBufferBytes);
        break;
      case 3:
        ASSERT_TRUE(Free().ok());
        buffer_ = Alloc(kBufferBytes);
        break;
      default:
        EXPECT_EQ(gpu_->Status().owner(), kOwner);
        break;
    }
  }
  done = true;
  submitter.join();
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
  std::lock_guard<std::mutex> l(mu);
  ASSERT_TRUE(Scrub().ok());
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
  EXPECT_EQ(Read(0, kBufferBytes), std::string(kBufferBytes, '\0'));
  // Every refusal was counted by the device (the owner never changed).
  EXPECT_EQ(static_cast<uint64_t>(refused), gpu_->Status().rejected_chunks());
}

// Chunks shaped like a whole 2 MiB page of device memory are decrypted into
// the copy engine's spare page, which then takes the old page's place: the
// same rules hold as for chunks copied in from scratch.
class WholePageTest : public CopyEngineTest {
 protected:
  static constexpr uint64_t kPage = kDevicePageBytes;
  // Two whole pages and a short last one.
  void SetUp() override {
    slot_size_ = kPage;
    buffer_bytes_ = 2 * kPage + 65536;
    memory_bytes_ = 8 * kPage;
    EmulatedGpuFixture::SetUp();
  }
  static std::string Pattern(char seed, size_t n) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7 % 251);
    return s;
  }
};

TEST_F(WholePageTest, WholePagesAndPartsLandInDeviceMemory) {
  const std::string a = Pattern('a', kPage), b = Pattern('b', kPage);
  const std::string tail = Pattern('t', 65536), part = Pattern('p', 4096);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, a)).ok());
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 2, 1, kPage, b)).ok());
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 3, 2, 2 * kPage, tail)).ok());
  EXPECT_EQ(Read(0, buffer_bytes_), a + b + tail);
  // A part of a page written over a whole one, across the page boundary.
  ASSERT_TRUE(
      gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 4, 3, kPage - 2048, part)).ok());
  EXPECT_EQ(Read(kPage - 4096, 8192),
            a.substr(kPage - 4096, 2048) + part + b.substr(2048, 2048));
  EXPECT_EQ(NextCounter(), 5u);
}

TEST_F(WholePageTest, RefusedWholePageChangesNothingAndLeavesNoPlaintext) {
  const std::string a = Pattern('a', kPage);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, a)).ok());
  // Only the tag is wrong: the decryption itself yields the real plaintext,
  // in the spare page.
  auto r = Stage(keys_.lce_h2d, 2, 1, 0, Pattern('s', kPage));
  bounce_->tag(1)[5] ^= 1;
  EXPECT_EQ(gpu_->SubmitH2D(kOwner, r).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Read(0, kPage), a);
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
  EXPECT_EQ(NextCounter(), 2u);
}

TEST_F(WholePageTest, ReplacedPageKeepsPlaintextOnlyUntilTheScrub) {
  const std::string a = Pattern('a', kPage), b = Pattern('b', kPage);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, a)).ok());
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 2, 1, 0, b)).ok());
  EXPECT_EQ(Read(0, kPage), b);
  // The page that held `a` is the spare now: not wiped per chunk.
  EXPECT_FALSE(gpu_->ScratchIsClearForTest());
  ASSERT_TRUE(Scrub().ok());
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
  EXPECT_EQ(Read(0, buffer_bytes_), std::string(buffer_bytes_, '\0'));
}

TEST_F(WholePageTest, ScrubDuringWholePageDecryptionDiscardsIt) {
  StartWithHook([&] { ASSERT_TRUE(Scrub().ok()); });
  auto r = Stage(keys_.lce_h2d, 1, 0, kPage, Pattern('w', kPage));
  hook_armed_ = true;
  auto st = gpu_->SubmitH2D(kOwner, r);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Read(0, buffer_bytes_), std::string(buffer_bytes_, '\0'));
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
  EXPECT_EQ(NextCounter(), 1u);
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, r).ok());
  EXPECT_EQ(Read(kPage, kPage), Pattern('w', kPage));
}

TEST_F(WholePageTest, ResetWipesTheSparePage) {
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, Pattern('a', kPage))).ok());
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 2, 1, 0, Pattern('b', kPage))).ok());
  EXPECT_FALSE(gpu_->ScratchIsClearForTest());
  gpu_->Reset();
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
}

}  // namespace
}  // namespace gputravel

namespace gputravel {
namespace {

// ATTACK (a holder, or the host, exchanging keys while a chunk is in the
// copy engine; the defence holds): an exchange nobody authorised, which then
// fails (its key is not on the curve), lands between the decryption and the
// commit. Memory is wiped and no session is left: the chunk is discarded,
// not committed into the wiped device, and neither it nor an earlier
// committed chunk is left in the copy engine's scratch.
TEST_F(CopyEngineTest, FailedUnauthorisedExchangeDuringDecryptionDiscardsTheChunk) {
  StartWithHook([&] {
    v1::KeyExchangeRequest bad;
    std::string point = (*EcKey::Generate(Curve::kP384)).PublicPoint();
    point.back() ^= 1;
    bad.set_requester_public_key(point);
    bad.set_requester_nonce(RandomString(32));
    EXPECT_FALSE(gpu_->KeyExchange(kOwner, bad).ok());
  });
  ASSERT_TRUE(gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'p'))).ok());
  hook_armed_ = true;
  auto st = gpu_->SubmitH2D(kOwner, Stage(keys_.lce_h2d, 2, 1, 64, std::string(64, 'q')));
  EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition) << st.status();
  EXPECT_EQ(gpu_->Status().session_id(), 0u);
  EXPECT_EQ(gpu_->Status().buffers(), 0u);
  EXPECT_TRUE(gpu_->MemoryIsZeroForTest());
  EXPECT_TRUE(gpu_->ScratchIsClearForTest());
}

// The copy engines run side by side: while LCE1 is in the middle of a chunk
// (held in its decryption), LCE2 decrypts and commits a chunk of its own. A
// device that ran one chunk at a time across all engines would keep LCE2
// waiting until LCE1's chunk is done (here: until the hook gives up).
TEST_F(CopyEngineTest, EnginesDecryptSideBySide) {
  absl::Notification lce1_decrypting, lce2_done;
  std::atomic<bool> lce2_finished_meanwhile{false};
  EmulatedGpuOptions o;
  o.decrypt_hook_for_test = [&](uint32_t engine) {
    if (engine != 1) return;
    lce1_decrypting.Notify();
    lce2_finished_meanwhile = lce2_done.WaitForNotificationWithTimeout(absl::Seconds(20));
  };
  Start(o);
  const ChannelMaterial k1 = *DeriveCopyEngineKey(secret_, 1, true);
  const ChannelMaterial k2 = *DeriveCopyEngineKey(secret_, 2, true);
  const auto c1 = StageAt(k1, 1, 1, 0, buffer_, 0, std::string(4096, 'x'));
  const auto c2 = StageAt(k2, 2, 1, 1, buffer_, 4096, std::string(4096, 'y'));
  absl::StatusOr<uint32_t> r1 = absl::UnknownError("not run");
  std::thread lce1([&] { r1 = gpu_->SubmitH2D(kOwner, c1); });
  lce1_decrypting.WaitForNotification();
  auto r2 = gpu_->SubmitH2D(kOwner, c2);
  lce2_done.Notify();
  lce1.join();
  EXPECT_TRUE(lce2_finished_meanwhile) << "LCE2 waited for LCE1's chunk";
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(Read(0, 8192), std::string(4096, 'x') + std::string(4096, 'y'));
}

// Every engine writes its own range of one buffer at once, each in counter
// order on its own ring: parts of pages (copied in from each engine's
// scratch) interleave with whole pages (each engine's spare page put in
// place). Device memory ends up holding every engine's bytes, whole, and
// each engine's counter moved exactly by its chunks.
class EnginesTest : public CopyEngineTest {
 protected:
  static constexpr uint64_t kPage = kDevicePageBytes;
  void SetUp() override {
    slot_size_ = kPage;
    buffer_bytes_ = 8 * kPage;
    memory_bytes_ = 16 * kPage;
    EmulatedGpuFixture::SetUp();
  }
};

TEST_F(EnginesTest, EnginesWriteDifferentRangesOfOneBufferAtOnce) {
  constexpr uint64_t kRange = kPage;  // each engine's share: one page
  std::vector<std::string> want(kCopyEngines);
  std::vector<absl::Status> results(kCopyEngines);
  std::vector<uint32_t> chunks(kCopyEngines);
  std::vector<std::thread> threads;
  for (uint32_t e = 0; e < kCopyEngines; ++e) {
    // Even engines write their page whole, in rounds; odd ones in 64 KiB
    // parts (the last part of each round shorter).
    std::string data(kRange, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('A' + e + i % 13);
    want[e] = data;
    auto ring = BounceBuffer::Create(dir_ + "/ring" + std::to_string(e), 1, kPage);
    ASSERT_TRUE(ring.ok()) << ring.status();
    v1::AttachBounceRequest ab;
    ab.set_path((*ring)->path());
    ab.set_slots(1);
    ab.set_slot_size(kPage);
    auto id = gpu_->AttachBounce(kOwner, ab);
    ASSERT_TRUE(id.ok()) << id.status();
    const ChannelMaterial key = *DeriveCopyEngineKey(secret_, e, true);
    threads.emplace_back([this, e, data, id = *id, ring = std::shared_ptr<BounceBuffer>(
                                                       std::move(*ring)),
                          key = key.Clone(), &results, &chunks] {
      auto cipher = *ChannelCipher::Create(key);
      uint32_t counter = 1;
      for (int round = 0; round < 3 && results[e].ok(); ++round) {
        const uint64_t part = e % 2 == 0 ? kRange : 65536 - 32 * round;
        for (uint64_t off = 0; off < kRange && results[e].ok(); off += part) {
          const uint64_t n = std::min<uint64_t>(part, kRange - off);
          const uint64_t at = e * kRange + off;
          const std::string aad = ChunkAad(session_, buffer_, at, static_cast<uint32_t>(n));
          uint8_t tag[16];
          results[e] = cipher->Encrypt(counter, reinterpret_cast<const uint8_t*>(aad.data()),
                                       aad.size(),
                                       reinterpret_cast<const uint8_t*>(data.data()) + off, n,
                                       ring->slot(0), tag);
          std::memcpy(ring->tag(0), tag, 16);
          v1::SubmitH2DRequest r;
          r.set_bounce_id(id);
          r.set_slot(0);
          r.set_buffer_id(buffer_);
          r.set_offset(at);
          r.set_length(static_cast<uint32_t>(n));
          r.set_tag_offset(ring->tag_offset(0));
          r.set_session_id(session_);
          r.set_copy_engine(e);
          auto next = gpu_->SubmitH2D(kOwner, r);
          if (!next.ok()) {
            results[e] = next.status();
          } else if (*next != ++counter) {
            results[e] = absl::InternalError("next counter " + std::to_string(*next));
          }
        }
      }
      chunks[e] = counter - 1;
    });
  }
  for (auto& t : threads) t.join();
  std::string all;
  for (uint32_t e = 0; e < kCopyEngines; ++e) {
    EXPECT_TRUE(results[e].ok()) << "LCE" << e << ": " << results[e];
    all += want[e];
  }
  for (uint64_t off = 0; off < buffer_bytes_; off += 8u << 20) {
    EXPECT_EQ(Read(off, std::min<uint64_t>(8u << 20, buffer_bytes_ - off)),
              all.substr(off, 8u << 20))
        << "device memory at " << off;
  }
  const v1::DeviceStatus st = gpu_->Status();
  ASSERT_EQ(st.copy_engines_size(), static_cast<int>(kCopyEngines));
  for (const auto& ce : st.copy_engines()) {
    EXPECT_EQ(ce.h2d_chunks(), chunks[ce.engine()]) << "LCE" << ce.engine();
    EXPECT_EQ(ce.h2d_next_counter(), chunks[ce.engine()] + 1) << "LCE" << ce.engine();
  }
  EXPECT_EQ(st.rejected_chunks(), 0u);
  ASSERT_TRUE(Scrub().ok());
  EXPECT_TRUE(gpu_->ScratchIsClearForTest()) << "an engine's scratch or spare kept plaintext";
}

}  // namespace
}  // namespace gputravel
