// The streaming doorbell (SubmitH2DStream) and the holder's writer over it:
// the device's rules hold per chunk on the stream, the first refused chunk
// ends the stream and changes nothing, and the writer lands every window
// exactly, from lent views or from copies.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "device/emulated_gpu_fixture.h"
#include "device/h2d_source.h"
#include "device/h2d_writer.h"
#include "device/window_digest.h"
#include "keyxfer/handoff_lanes.h"
#include "gtest/gtest.h"

namespace gputravel {
namespace {

using testing_fixture::EmulatedGpuFixture;
using testing_fixture::kOwner;

using Stream = grpc::ClientReaderWriter<v1::SubmitH2DRequest, v1::SubmitH2DAck>;

class H2dStreamTest : public EmulatedGpuFixture {
 protected:
  void SetUp() override {
    EmulatedGpuFixture::SetUp();
    channel_ = Serve();
    stub_ = v1::Device::NewStub(channel_);
  }

  // Sends `reqs` on one stream, half-closes, and collects the acks and the
  // final status.
  grpc::Status SendAll(const std::vector<v1::SubmitH2DRequest>& reqs,
                       std::vector<v1::SubmitH2DAck>* acks) {
    grpc::ClientContext ctx;
    std::unique_ptr<Stream> s = stub_->SubmitH2DStream(&ctx);
    for (const auto& r : reqs) {
      if (!s->Write(r)) break;  // the device ended the stream already
    }
    s->WritesDone();
    v1::SubmitH2DAck ack;
    while (s->Read(&ack)) acks->push_back(ack);
    return s->Finish();
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Device::Stub> stub_;
};

TEST_F(H2dStreamTest, InOrderChunksAreAckedOneByOne) {
  std::vector<v1::SubmitH2DRequest> reqs;
  for (uint32_t i = 0; i < 4; ++i) {
    reqs.push_back(Stage(keys_.lce_h2d, 1 + i, i, i * 1024, std::string(1024, 'a' + i)));
  }
  std::vector<v1::SubmitH2DAck> acks;
  grpc::Status st = SendAll(reqs, &acks);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(acks.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(acks[i].sequence(), i);
    EXPECT_EQ(acks[i].slot(), i);
    EXPECT_EQ(acks[i].next_counter(), i + 2);
  }
  EXPECT_EQ(Read(0, 4096), std::string(1024, 'a') + std::string(1024, 'b') +
                               std::string(1024, 'c') + std::string(1024, 'd'));
}

// Only the unary doorbell may attach its ring; on a stream it is refused.
TEST_F(H2dStreamTest, DoorbellThatAttachesARingIsRefusedOnTheStream) {
  auto r = Stage(keys_.lce_h2d, 1, 0, 0, std::string(1024, 'a'));
  r.mutable_attach()->set_path(bounce_->path());
  r.mutable_attach()->set_slots(kSlots);
  r.mutable_attach()->set_slot_size(kSlotSize);
  const uint64_t rings = gpu_->Status().bounce_buffers();
  std::vector<v1::SubmitH2DAck> acks;
  grpc::Status st = SendAll({r}, &acks);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("AttachBounce"), std::string::npos) << st.error_message();
  EXPECT_TRUE(acks.empty());
  EXPECT_EQ(gpu_->Status().bounce_buffers(), rings);
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 1u);
  EXPECT_EQ(Read(0, 1024), std::string(1024, '\0'));
}

TEST_F(H2dStreamTest, BadChunkInTheMiddleEndsTheStreamAndChangesNothing) {
  std::vector<v1::SubmitH2DRequest> reqs;
  reqs.push_back(Stage(keys_.lce_h2d, 1, 0, 0, std::string(1024, 'a')));
  reqs.push_back(Stage(keys_.lce_h2d, 2, 1, 1024, std::string(1024, 'b')));
  auto bad = Stage(keys_.lce_h2d, 3, 2, 2048, std::string(1024, 'c'));
  bounce_->slot(2)[100] ^= 0x40;  // tampered in the bounce slot
  reqs.push_back(bad);
  reqs.push_back(Stage(keys_.lce_h2d, 4, 3, 3072, std::string(1024, 'd')));
  std::vector<v1::SubmitH2DAck> acks;
  grpc::Status st = SendAll(reqs, &acks);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(st.error_message().find("chunk 2 of the stream"), std::string::npos)
      << st.error_message();
  EXPECT_NE(st.error_message().find("tag check failed"), std::string::npos);
  ASSERT_EQ(acks.size(), 2u);
  // The good chunks before it landed; neither it nor the one after did.
  EXPECT_EQ(Read(0, 4096), std::string(1024, 'a') + std::string(1024, 'b') +
                               std::string(2048, '\0'));
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 3u);
  EXPECT_EQ(gpu_->Status().rejected_chunks(), 1u);
  // The chunk sent after the bad one is refused later too: it was made for
  // counter 4, the copy engine still expects 3.
  std::vector<v1::SubmitH2DAck> more;
  st = SendAll({reqs[3]}, &more);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(more.empty());
  EXPECT_EQ(Read(3072, 1024), std::string(1024, '\0'));
}

TEST_F(H2dStreamTest, RefusedBeforeDecryptionEndsTheStreamToo) {
  auto r = Stage(keys_.lce_h2d, 1, 0, 16, std::string(64, 'a'));  // misaligned
  std::vector<v1::SubmitH2DAck> acks;
  grpc::Status st = SendAll({r}, &acks);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(acks.empty());
  gpu_->SetOwner("orchestrator");  // a stream from a domain not routed to
  st = SendAll({Stage(keys_.lce_h2d, 1, 0, 0, std::string(64, 'a'))}, &acks);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

// The property test of emulated_gpu_test through the stream: random runs of
// valid chunks, each run possibly ended by an invalid chunk of a random kind
// (and followed by chunks that must never be processed), never let an invalid
// chunk change device memory, and valid ones land exactly.
TEST_F(H2dStreamTest, InvalidChunksNeverChangeMemoryThroughTheStream) {
  std::mt19937 rng(4242);
  std::string expected(kBufferBytes, '\0');
  uint32_t next = 1;
  ChannelMaterial wrong = keys_.lce_h2d.Clone();
  RandomBytes(wrong.key.data(), 32);
  for (int round = 0; round < 120; ++round) {
    std::vector<v1::SubmitH2DRequest> reqs;
    std::vector<std::pair<uint64_t, std::string>> valid;
    const uint32_t n_valid = rng() % 3;  // slots 0..n_valid-1
    for (uint32_t k = 0; k < n_valid; ++k) {
      uint32_t len = 32 * (1 + rng() % 8);
      uint64_t off = (rng() % ((kBufferBytes - len) / 32 + 1)) * 32;
      std::string data(len, static_cast<char>('A' + rng() % 26));
      reqs.push_back(Stage(keys_.lce_h2d, next + k, k, off, data));
      valid.emplace_back(off, data);
    }
    const uint32_t c = next + n_valid;  // the counter the device expects then
    const int kind = rng() % 10;        // 0: no invalid chunk in this run
    if (kind != 0) {
      const uint32_t slot = n_valid;
      uint32_t len = 32 * (1 + rng() % 8);
      uint64_t off = (rng() % ((kBufferBytes - len) / 32 + 1)) * 32;
      std::string data(len, 'X');
      v1::SubmitH2DRequest r;
      switch (kind) {
        case 1:  // replay of a used counter
          r = Stage(keys_.lce_h2d, c - 1, slot, off, data);
          break;
        case 2:  // skipping ahead
          r = Stage(keys_.lce_h2d, c + 1 + rng() % 5, slot, off, data);
          break;
        case 3:  // wrong key
          r = Stage(wrong, c, slot, off, data);
          break;
        case 4:  // tampered ciphertext after staging
          r = Stage(keys_.lce_h2d, c, slot, off, data);
          bounce_->slot(slot)[rng() % len] ^= 0x40;
          break;
        case 5: {  // misaligned destination, with a tag right for it
          const uint64_t at = std::min<uint64_t>(off, kBufferBytes - 2 * len - 32) + 1 + rng() % 31;
          r = Stage(keys_.lce_h2d, c, slot, at, data + data);
          break;
        }
        case 6:  // a session that is not the device's
          r = Stage(keys_.lce_h2d, c, slot, off, data);
          r.set_session_id(session_ + 1 + rng() % 3);
          break;
        case 7:  // another copy engine, or none
          r = Stage(keys_.lce_h2d, c, slot, off, data);
          r.set_copy_engine(1 + rng() % (kCopyEngines + 3));
          break;
        case 8:  // at the counter due, in the next IV space
        {
          ChannelMaterial other = keys_.lce_h2d.Clone();
          other.channel_counter = 1;
          r = Stage(other, c, slot, off, data);
          break;
        }
        default:  // redirected
          r = Stage(keys_.lce_h2d, c, slot, off, data);
          r.set_offset(off == 0 ? 32 : off - 32);
          break;
      }
      reqs.push_back(r);
      // A valid-looking chunk after it must never be processed.
      if (slot + 1 < kSlots) {
        reqs.push_back(Stage(keys_.lce_h2d, c, slot + 1, 0, std::string(32, 'Y')));
      }
    }
    std::vector<v1::SubmitH2DAck> acks;
    grpc::Status st = SendAll(reqs, &acks);
    ASSERT_EQ(acks.size(), n_valid) << "round " << round;
    if (kind == 0) {
      ASSERT_TRUE(st.ok()) << st.error_message();
    } else {
      ASSERT_FALSE(st.ok()) << "kind " << kind << " in round " << round;
    }
    for (const auto& v : valid) expected.replace(v.first, v.second.size(), v.second);
    next += n_valid;
    ASSERT_EQ(gpu_->Status().h2d_next_counter(), next);
    // Every round: a later valid chunk must not be able to hide what an
    // invalid one wrote.
    ASSERT_TRUE(Read(0, kBufferBytes) == expected) << "kind " << kind << " in round " << round;
  }
}

// A source that lends views of a string and counts the views outstanding.
class StringSource final : public H2dSource {
 public:
  explicit StringSource(std::string data, bool viewable = true)
      : data_(std::move(data)), viewable_(viewable) {}
  bool CanView() const override { return viewable_; }
  absl::StatusOr<PlaintextView> View(uint64_t off, size_t n) override {
    if (fail_at_ >= 0 && off >= uint64_t(fail_at_)) {
      return absl::DataLossError("disk went away");
    }
    ++outstanding_;
    ++views_;
    return PlaintextView(reinterpret_cast<const uint8_t*>(data_.data()) + off, n,
                         [this] { --outstanding_; });
  }
  absl::Status Read(uint64_t off, uint8_t* dst, size_t n) override {
    if (fail_at_ >= 0 && off >= uint64_t(fail_at_)) {
      return absl::DataLossError("disk went away");
    }
    std::memcpy(dst, data_.data() + off, n);
    ++reads_;
    return absl::OkStatus();
  }
  std::string data_;
  bool viewable_;
  int64_t fail_at_ = -1;
  std::atomic<int> outstanding_{0}, views_{0}, reads_{0};
};

class H2dWriterTest : public H2dStreamTest {
 protected:
  void SetUp() override {
    H2dStreamTest::SetUp();
    big_ = Alloc(kBig);
  }
  absl::StatusOr<H2dWriteStats> WriteWith(H2dSource& src, uint64_t length,
                                          uint32_t chunk, int threads,
                                          const ChannelMaterial* key = nullptr,
                                          BouncePool* pool = nullptr) {
    H2dWriterOptions wo;
    wo.chunk_size = chunk;
    wo.threads = threads;
    wo.bounce_dir = dir_;
    wo.pool = pool;
    H2dWriter w(channel_, wo);
    CounterWindow window{gpu_->Status().h2d_next_counter(), H2dWriter::ChunksFor(length, chunk)};
    return w.Write(key ? *key : keys_.lce_h2d, session_, big_, 0, length, window, src);
  }
  std::string ReadBig(uint64_t len) {
    v1::DeviceCommand c;
    c.mutable_read()->set_buffer_id(big_);
    c.mutable_read()->set_length(len);
    return Command(c)->data();
  }

  static constexpr uint64_t kBig = 256 << 10;
  uint64_t big_ = 0;
};

TEST_F(H2dWriterTest, ViewsAndCopiesLandTheSameWindow) {
  const uint64_t kLength = 100 * 1024 + 96;  // the last chunk is partial
  const std::string data = RandomString(kLength);
  for (bool viewable : {true, false}) {
    for (int threads : {1, 2, 3}) {
      for (uint32_t chunk : {4096u, 8192u, 32768u}) {
        StringSource src(data, viewable);
        const uint32_t first = gpu_->Status().h2d_next_counter();
        auto stats = WriteWith(src, kLength, chunk, threads);
        ASSERT_TRUE(stats.ok()) << stats.status();
        EXPECT_EQ(stats->zero_copy, viewable);
        EXPECT_EQ(stats->chunks, H2dWriter::ChunksFor(kLength, chunk));
        EXPECT_EQ(src.outstanding_, 0) << "every view is released";
        EXPECT_EQ(viewable ? src.views_.load() : src.reads_.load(),
                  static_cast<int>(stats->chunks));
        EXPECT_TRUE(ReadBig(kLength) == data)
            << "viewable " << viewable << " threads " << threads << " chunk " << chunk;
        auto digest = WindowDigest(keys_.lce_h2d, session_, big_, 0, data, chunk, first);
        EXPECT_EQ(*digest, stats->digest);
      }
    }
  }
  EXPECT_EQ(gpu_->Status().bounce_buffers(), 1u);  // the writer detached its rings
}

// The holder agent's way: one ring for every write, mapped by the device for
// each write and released by each write's last doorbell (no DetachBounce).
// A window striped over k copy engines (each lane its own key, counters and
// part of the window, granted to that part on the device): it lands whole,
// each engine's counter moves by its lane's chunks, no grant refuses
// anything, and the digest the writer reports is the one the orchestrator
// recomputes from the read-back with the lanes' keys, whatever k.
TEST_F(H2dWriterTest, LanesThroughSeveralEnginesLandTheWindowAndKeepTheDigest) {
  const uint64_t kLength = 40 * 4096 + 96;  // the last chunk is partial
  const std::string data = RandomString(kLength);
  for (uint32_t k : {1u, 2u, 3u, 4u, 8u}) {
    for (int threads : {1, 2, 5}) {
      Establish();  // fresh counters on every engine; memory kept
      auto planned = PlanLanes(kLength, 4096, k);
      ASSERT_TRUE(planned.ok()) << planned.status();
      std::vector<ChannelMaterial> keys;
      for (const auto& l : *planned) {
        keys.push_back(*DeriveCopyEngineKey(secret_, l.copy_engine(), true));
      }
      std::vector<H2dLaneWrite> lanes;
      v1::DeviceCommand grant;
      for (size_t i = 0; i < planned->size(); ++i) {
        const v1::H2dLane& l = (*planned)[i];
        lanes.push_back(H2dLaneWrite{l.copy_engine(), &keys[i],
                                     CounterWindow{l.first_counter(), l.counter_count()},
                                     l.offset(), l.length()});
        v1::H2dGrant* g = grant.mutable_grant_h2d()->add_grants();
        g->set_copy_engine(l.copy_engine());
        g->set_buffer_id(big_);
        g->set_offset(l.offset());
        g->set_length(l.length());
        g->set_last_counter(l.first_counter() + l.counter_count() - 1);
      }
      ASSERT_EQ(Command(grant)->code(), 0);
      H2dWriterOptions wo;
      wo.chunk_size = 4096;
      wo.threads = threads;
      wo.bounce_dir = dir_;
      H2dWriter w(channel_, wo);
      StringSource src(data);
      auto stats = w.Write(lanes, session_, big_, 0, kLength, src);
      ASSERT_TRUE(stats.ok()) << "k " << k << " threads " << threads << ": " << stats.status();
      EXPECT_EQ(stats->chunks, H2dWriter::ChunksFor(kLength, 4096));
      EXPECT_EQ(src.outstanding_, 0);
      EXPECT_TRUE(ReadBig(kLength) == data) << "k " << k << " threads " << threads;
      auto digest = WindowDigest(lanes, session_, big_, 0, data, 4096);
      ASSERT_TRUE(digest.ok()) << digest.status();
      EXPECT_EQ(*digest, stats->digest) << "k " << k;
      EXPECT_EQ(GrantRefusals(), 0u);
      const v1::DeviceStatus st = gpu_->Status();
      EXPECT_EQ(st.bounce_buffers(), 0u) << "every lane's last doorbell released its mapping";
      for (const auto& ce : st.copy_engines()) {
        uint32_t want = 0;
        for (const auto& l : *planned) {
          if (l.copy_engine() == ce.engine()) want = l.counter_count();
        }
        EXPECT_EQ(ce.h2d_chunks(), want) << "k " << k << " LCE" << ce.engine();
      }
    }
  }
  // One lane: the same digest as the single-key form.
  std::vector<H2dLaneWrite> one{H2dLaneWrite{0, &keys_.lce_h2d, CounterWindow{1, 41}, 0, kLength}};
  EXPECT_EQ(*WindowDigest(one, session_, big_, 0, data, 4096),
            *WindowDigest(keys_.lce_h2d, session_, big_, 0, data, 4096, 1));
}

// One lane's key is not its engine's: the device refuses that lane, the
// write stops with that refusal, the other lanes stop too, and no mapping
// of the ring is left behind.
TEST_F(H2dWriterTest, OneLaneRefusedStopsTheWholeWrite) {
  const uint64_t kLength = 64 * 4096;
  Establish();
  auto planned = *PlanLanes(kLength, 4096, 4);
  std::vector<ChannelMaterial> keys;
  for (const auto& l : planned) keys.push_back(*DeriveCopyEngineKey(secret_, l.copy_engine(), true));
  keys[2] = keys[1].Clone();  // LCE1's key on LCE2
  std::vector<H2dLaneWrite> lanes;
  for (size_t i = 0; i < planned.size(); ++i) {
    const v1::H2dLane& l = planned[i];
    lanes.push_back(H2dLaneWrite{l.copy_engine(), &keys[i],
                                 CounterWindow{l.first_counter(), l.counter_count()}, l.offset(),
                                 l.length()});
  }
  H2dWriterOptions wo;
  wo.chunk_size = 4096;
  wo.threads = 4;
  wo.bounce_dir = dir_;
  H2dWriter w(channel_, wo);
  StringSource src(RandomString(kLength));
  auto stats = w.Write(lanes, session_, big_, 0, kLength, src);
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kUnauthenticated) << stats.status();
  EXPECT_EQ(src.outstanding_, 0);
  EXPECT_EQ(gpu_->Status().bounce_buffers(), 0u);
}

TEST_F(H2dWriterTest, KeptRingServesEveryWriteAndTheLastDoorbellReleasesIt) {
  BouncePool pool(dir_);
  const size_t rings_before = gpu_->Status().bounce_buffers();  // the fixture's own
  for (uint64_t length : {uint64_t{64} * 1024, uint64_t{4096}, uint64_t{64} * 1024}) {
    for (int round = 0; round < 2; ++round) {
      StringSource src(RandomString(length));
      auto stats = WriteWith(src, length, 8192, 2, nullptr, &pool);
      ASSERT_TRUE(stats.ok()) << stats.status();
      EXPECT_TRUE(ReadBig(length) == src.data_);
      EXPECT_EQ(gpu_->Status().bounce_buffers(), rings_before)
          << "the last doorbell released the ring (length " << length << ")";
    }
  }
  // One ring per geometry change: 64 KiB windows (4 slots of 8 KiB), then a
  // one-chunk 4 KiB window (1 slot of 4 KiB), then 64 KiB again.
  EXPECT_EQ(pool.created(), 3u);
}

// The host maps the holder's bounce ring too, and can write a slot the
// moment ciphertext lands in it (when OpenSSL, encrypting in place, would
// read it back for the tag). Whatever it does, a chunk is either refused or
// lands exactly as the holder encrypted it.
TEST_F(H2dWriterTest, HostWritingTheRingMeanwhileCannotChangeWhatLands) {
  BouncePool pool(dir_);
  const uint64_t kLength = 64 * 1024;
  StringSource first(RandomString(kLength));
  ASSERT_TRUE(WriteWith(first, kLength, 16384, 1, nullptr, &pool).ok());  // makes the ring
  std::string ring;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    if (e.path().filename().string().rfind("gputravel-bounce-", 0) == 0) ring = e.path();
  }
  ASSERT_FALSE(ring.empty());
  const int fd = ::open(ring.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const size_t size = std::filesystem::file_size(ring);
  void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(m, MAP_FAILED);
  auto* target = static_cast<volatile uint8_t*>(m) + 100;  // slot 0
  std::atomic<bool> go{false}, quit{false};
  std::thread host([&] {
    while (!quit.load()) {
      if (!go.load()) continue;
      const uint8_t before = *target;
      while (go.load() && *target == before) {
      }
      if (go.load()) *target ^= 0x01;
    }
  });
  int refused = 0;
  // At least 40 writes, and on until the host's thread has hit one (it may
  // get no CPU for a while when other tests share the machine).
  for (int i = 0; i < 40 || (refused == 0 && i < 2000); ++i) {
    StringSource src(RandomString(kLength));
    go = true;
    auto stats = WriteWith(src, kLength, 16384, 1, nullptr, &pool);
    go = false;
    if (!stats.ok()) {
      ++refused;
      EXPECT_EQ(stats.status().code(), absl::StatusCode::kUnauthenticated) << stats.status();
      continue;
    }
    ASSERT_TRUE(ReadBig(kLength) == src.data_) << "the host's bytes landed in write " << i;
  }
  quit = true;
  host.join();
  ::munmap(m, size);
  if (std::thread::hardware_concurrency() > 1) {
    EXPECT_GT(refused, 0) << "the host's writes never landed: the race was not exercised";
  }
}

// A window that starts at counter 0 or runs past the last 32-bit counter
// would reuse an IV: refused before anything is encrypted or sent.
TEST_F(H2dWriterTest, WindowThatWouldWrapTheCounterIsRefused) {
  H2dWriterOptions wo;
  wo.chunk_size = 4096;
  wo.bounce_dir = dir_;
  H2dWriter w(channel_, wo);
  StringSource src(RandomString(3 * 4096));
  const uint32_t next = gpu_->Status().h2d_next_counter();
  // Counter 0 is never used; a window past the last counter needs a fresh
  // key exchange, and says so by its code.
  for (auto [bad, code] : {std::make_pair(CounterWindow{0, 3}, absl::StatusCode::kInvalidArgument),
                           std::make_pair(CounterWindow{0xFFFFFFFEu, 3},
                                          absl::StatusCode::kResourceExhausted)}) {
    auto st = w.Write(keys_.lce_h2d, session_, big_, 0, 3 * 4096, bad, src);
    EXPECT_EQ(st.status().code(), code) << bad.first;
    EXPECT_NE(st.status().message().find("cannot be used"), std::string::npos) << st.status();
  }
  auto empty = w.Write(keys_.lce_h2d, session_, big_, 0, 0, CounterWindow{next, 0}, src);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("window is empty"), std::string::npos)
      << empty.status();
  EXPECT_EQ(src.views_.load(), 0) << "nothing was read";
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), next);
}

TEST_F(H2dWriterTest, FailedWriteStillLeavesNoRingMappedInTheDevice) {
  BouncePool pool(dir_);
  const size_t rings_before = gpu_->Status().bounce_buffers();
  StringSource src(RandomString(64 * 4096));
  src.fail_at_ = 20 * 4096;  // the last doorbell is never rung
  auto stats = WriteWith(src, src.data_.size(), 4096, 2, nullptr, &pool);
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kDataLoss) << stats.status();
  EXPECT_EQ(gpu_->Status().bounce_buffers(), rings_before) << "detached by the writer";
  // The kept ring serves the next write.
  StringSource ok(RandomString(64 * 4096));
  stats = WriteWith(ok, ok.data_.size(), 4096, 2, nullptr, &pool);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(pool.created(), 1u);
}

TEST_F(H2dWriterTest, OneChunkWindowOnTheCallingThread) {
  StringSource src(RandomString(4096));
  auto stats = WriteWith(src, 4096, 4096, 2);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->chunks, 1u);
  EXPECT_TRUE(stats->zero_copy);
  EXPECT_EQ(src.outstanding_, 0);
  EXPECT_TRUE(ReadBig(4096) == src.data_);
}

TEST_F(H2dWriterTest, SourceFailureStopsTheWriteWithItsStatus) {
  for (bool viewable : {true, false}) {
    StringSource src(RandomString(64 * 4096), viewable);
    src.fail_at_ = 20 * 4096;
    const uint32_t before = gpu_->Status().h2d_next_counter();
    auto stats = WriteWith(src, src.data_.size(), 4096, 2);
    EXPECT_EQ(stats.status().code(), absl::StatusCode::kDataLoss) << stats.status();
    EXPECT_NE(stats.status().message().find("disk went away"), std::string::npos);
    EXPECT_EQ(src.outstanding_, 0);
    // Only chunks before the failure can have landed, in order.
    EXPECT_LE(gpu_->Status().h2d_next_counter(), before + 20);
  }
}

TEST_F(H2dWriterTest, WrongKeyRefusedByTheDeviceMidStream) {
  ChannelMaterial wrong = keys_.lce_h2d.Clone();
  RandomBytes(wrong.key.data(), 32);
  StringSource src(RandomString(16 * 4096));
  auto stats = WriteWith(src, src.data_.size(), 4096, 2, &wrong);
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kUnauthenticated) << stats.status();
  EXPECT_NE(stats.status().message().find("tag check failed"), std::string::npos);
  EXPECT_EQ(src.outstanding_, 0);
  EXPECT_EQ(ReadBig(16 * 4096), std::string(16 * 4096, '\0'));
  EXPECT_EQ(gpu_->Status().h2d_next_counter(), 1u);
}

TEST_F(H2dWriterTest, OldSessionRefusedWithFailedPrecondition) {
  StringSource src(RandomString(8 * 4096));
  const uint64_t old = session_;
  Establish();
  H2dWriterOptions wo;
  wo.chunk_size = 4096;
  wo.bounce_dir = dir_;
  H2dWriter w(channel_, wo);
  auto stats = w.Write(keys_.lce_h2d, old, big_, 0, src.data_.size(),
                       CounterWindow{1, 8}, src);
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kFailedPrecondition) << stats.status();
}

// A write waiting on a stalled device stops with CANCELLED once cancelled,
// not at its deadline: the copy engine below holds the first chunk until the
// test lets it go, which it does only after the write has returned. Both
// shapes of write: one chunk (one unary doorbell) and a stream.
TEST_F(H2dWriterTest, CancelStopsAWriteWaitingOnAStalledDevice) {
  std::atomic<bool> entered{false}, release{false};
  EmulatedGpuOptions o;
  o.copy_engine_hook_for_test = [&] {
    entered = true;
    for (int i = 0; i < 6000 && !release; ++i) absl::SleepFor(absl::Milliseconds(10));
  };
  for (uint64_t length : {uint64_t{4096}, uint64_t{16 * 4096}}) {
    entered = false;
    release = false;
    Start(o);
    channel_ = Serve();
    big_ = Alloc(kBig);
    H2dWriterOptions wo;
    wo.chunk_size = 4096;
    wo.bounce_dir = dir_;
    H2dWriter w(channel_, wo);
    StringSource src(RandomString(length));
    const CounterWindow window{1, H2dWriter::ChunksFor(length, 4096)};
    absl::StatusOr<H2dWriteStats> result;
    std::thread writer([&] {
      result = w.Write(keys_.lce_h2d, session_, big_, 0, length, window, src);
    });
    for (int i = 0; i < 2000 && !entered; ++i) absl::SleepFor(absl::Milliseconds(10));
    const bool reached = entered;
    w.Cancel();
    writer.join();  // while the device still holds the chunk
    release = true;
    ASSERT_TRUE(reached) << "the first chunk never reached the copy engine";
    EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled) << length << " "
                                                                   << result.status();
    EXPECT_EQ(src.outstanding_, 0);
    // A cancelled writer starts nothing more.
    auto again = w.Write(keys_.lce_h2d, session_, big_, 0, length, window, src);
    EXPECT_EQ(again.status().code(), absl::StatusCode::kCancelled) << again.status();
    Stop();  // waits for the device's handler, which still runs the hook
  }
}

// Something on the (host-relayed) device socket that acknowledges a chunk
// before its doorbell was rung is not the copy engine: the writer stops at
// once rather than reuse a slot the device may not have read.
class EarlyAckDevice final : public v1::Device::Service {
 public:
  // Set once the writer has given up on the stream (it cancels it on the
  // early ack); with no such check it never does.
  std::atomic<bool> stream_over{false};

  grpc::Status AttachBounce(grpc::ServerContext*, const v1::AttachBounceRequest*,
                            v1::AttachBounceResponse* out) override {
    out->set_bounce_id(1);
    return grpc::Status::OK;
  }
  grpc::Status DetachBounce(grpc::ServerContext*, const v1::DetachBounceRequest*,
                            v1::DetachBounceResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status SubmitH2DStream(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::SubmitH2DAck, v1::SubmitH2DRequest>* stream) override {
    v1::SubmitH2DAck ack;  // what chunk 0's ack would say, before it is rung
    ack.set_sequence(0);
    ack.set_slot(0);
    ack.set_next_counter(2);
    stream->Write(ack);
    v1::SubmitH2DRequest req;
    while (stream->Read(&req)) {
    }
    stream_over = true;
    return grpc::Status::OK;
  }
};

TEST_F(H2dWriterTest, AckBeforeItsDoorbellStopsTheWrite) {
  EarlyAckDevice fake;
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + dir_ + "/fake.sock", grpc::InsecureServerCredentials());
  b.RegisterService(&fake);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  H2dWriterOptions wo;
  wo.chunk_size = 4096;
  wo.threads = 1;
  wo.bounce_dir = dir_;
  // A source that holds the first chunk back until the writer has dealt
  // with the early ack (at most 20 s: then the doorbell goes out and, with
  // the ack taken for its own, the write waits for its deadline and fails).
  class HeldSource final : public H2dSource {
   public:
    explicit HeldSource(const std::atomic<bool>& over) : over_(over) {}
    bool CanView() const override { return false; }
    absl::StatusOr<PlaintextView> View(uint64_t, size_t) override {
      return absl::UnimplementedError("copies only");
    }
    absl::Status Read(uint64_t, uint8_t* dst, size_t n) override {
      for (int i = 0; i < 2000 && !over_; ++i) absl::SleepFor(absl::Milliseconds(10));
      std::memset(dst, 'x', n);
      return absl::OkStatus();
    }

   private:
    const std::atomic<bool>& over_;
  } src(fake.stream_over);
  H2dWriter w(MakeChannel("unix:" + dir_ + "/fake.sock"), wo);
  auto st = w.Write(keys_.lce_h2d, session_, big_, 0, 8 * 4096, CounterWindow{1, 8}, src);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kInternal) << st.status();
  EXPECT_NE(st.status().message().find("before its doorbell was rung"), std::string::npos)
      << st.status();
  server->Shutdown();
  unlink((dir_ + "/fake.sock").c_str());
}

}  // namespace
}  // namespace gputravel
