#include "device/h2d_writer.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "device/bounce_buffer.h"
#include "device/bounce_pool.h"
#include "device/tag_digest.h"
#include "keyxfer/device_session.h"
#include "keyxfer/secret_bytes.h"
#include "util/files.h"
#include "util/grpc_status.h"

namespace gputravel {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// What every chunk of one lane of a write shares: `dest_offset` and
// `source_offset` are where the lane starts in the device buffer and in the
// source, `length` its bytes, and its slots are `slot_base`.. of the ring.
struct WindowPlan {
  const ChannelMaterial* key;
  uint32_t engine;
  uint64_t session_id, buffer_id, dest_offset, source_offset, length;
  CounterWindow window;
  uint32_t chunk_size, n_chunks;
  uint64_t bounce_id;
  BounceBuffer* ring;
  uint32_t slot_base;
  H2dSource* source;

  uint32_t ChunkLen(uint32_t i) const {
    return static_cast<uint32_t>(
        std::min<uint64_t>(chunk_size, length - uint64_t{i} * chunk_size));
  }
  // The last chunk's doorbell also releases the ring from the device. The
  // chunk's tag is in the ring's tag area already (StageTag).
  // `slot` is the lane's own slot number (0..); the ring's is slot_base + slot.
  v1::SubmitH2DRequest Doorbell(uint32_t i, uint32_t slot) const {
    v1::SubmitH2DRequest req;
    req.set_release_bounce(i + 1 == n_chunks);
    req.set_bounce_id(bounce_id);
    req.set_slot(slot_base + slot);
    req.set_buffer_id(buffer_id);
    req.set_offset(dest_offset + uint64_t{i} * chunk_size);
    req.set_length(ChunkLen(i));
    req.set_tag_offset(ring->tag_offset(slot_base + slot));
    req.set_session_id(session_id);
    req.set_copy_engine(engine);
    return req;
  }
  uint8_t* Slot(uint32_t slot) const { return ring->slot(slot_base + slot); }
  // Puts a slot's tag where the copy engine reads it. The host can change it
  // there; the chunk is then refused, and the digest uses the private copy.
  void StageTag(uint32_t slot, const uint8_t* tag) const {
    std::memcpy(ring->tag(slot_base + slot), tag, kGcmTagSize);
  }
};

using Tag = std::array<uint8_t, kGcmTagSize>;

// Gets chunk i's plaintext (a view, or a copy into `staging`) and encrypts it
// into `out`. The view is released as soon as the encryption is done.
absl::Status EncryptChunk(const WindowPlan& p, ChannelCipher& cipher, uint32_t i,
                          std::vector<uint8_t>& staging, uint8_t* out, uint8_t* tag,
                          double* source_seconds) {
  const uint32_t n = p.ChunkLen(i);
  const uint64_t off = uint64_t{i} * p.chunk_size;
  auto t0 = Clock::now();
  PlaintextView view;
  const uint8_t* in = nullptr;
  if (p.source->CanView()) {
    auto v = p.source->View(p.source_offset + off, n);
    if (!v.ok()) return v.status();
    if (v->size() != n || v->data() == nullptr) {
      return absl::InternalError("plaintext source lent " + std::to_string(v->size()) +
                                 " bytes for a chunk of " + std::to_string(n));
    }
    view = std::move(*v);
    in = view.data();
  } else {
    if (staging.size() < n) staging.resize(n);  // a worker's first chunk is its largest
    absl::Status s = p.source->Read(p.source_offset + off, staging.data(), n);
    if (!s.ok()) return s;
    in = staging.data();
  }
  *source_seconds += Since(t0);
  std::string aad = ChunkAad(p.session_id, p.buffer_id, p.dest_offset + off, n);
  // `out` is a bounce slot the host can write meanwhile: the tag must cover
  // the ciphertext made here, not what the slot holds afterwards.
  return cipher.EncryptToShared(p.window.first + i, reinterpret_cast<const uint8_t*>(aad.data()),
                                aad.size(), in, n, out, tag);
}

}  // namespace

// How long the device has held a doorbell without acknowledging it, over
// every lane of the write: set when a doorbell goes out with none
// outstanding, moved on by each ack that leaves others outstanding, cleared
// by the ack of the last one. Read from any thread (H2dWriter::DeviceWait).
class DeviceWaitClock {
 public:
  void Rang() {
    absl::MutexLock l(&mu_);
    if (outstanding_++ == 0) since_ = absl::Now();
  }
  void Acked() {
    absl::MutexLock l(&mu_);
    if (outstanding_ > 0) --outstanding_;
    since_ = absl::Now();
  }
  // The write is over: nothing is outstanding any more.
  void Clear() {
    absl::MutexLock l(&mu_);
    outstanding_ = 0;
  }
  absl::Duration Wait() {
    absl::MutexLock l(&mu_);
    return outstanding_ == 0 ? absl::ZeroDuration() : absl::Now() - since_;
  }

 private:
  absl::Mutex mu_;
  uint64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time since_ ABSL_GUARDED_BY(mu_);
};

// The writer's calls to the device in progress (one per lane), which
// Cancel() cancels, and which a lane that failed aborts (Abort) so that the
// write's other lanes stop too; and how long the device has kept them
// waiting (`wait`).
struct H2dCancelPoint {
  DeviceWaitClock wait;
  absl::Mutex mu;
  bool cancelled ABSL_GUARDED_BY(mu) = false;
  bool aborted ABSL_GUARDED_BY(mu) = false;  // this write's, reset by Begin
  std::vector<grpc::ClientContext*> active ABSL_GUARDED_BY(mu);
  std::vector<grpc::ClientContext*> unabortable ABSL_GUARDED_BY(mu);

  // A write starts: no lane of it has failed.
  void Begin() {
    wait.Clear();
    absl::MutexLock l(&mu);
    aborted = false;
  }
  // Makes `ctx` a call Cancel() reaches, until Leave(ctx); false once the
  // writer was cancelled or the write aborted (the call must not start).
  bool Enter(grpc::ClientContext* ctx) {
    absl::MutexLock l(&mu);
    if (cancelled || aborted) return false;
    active.push_back(ctx);
    return true;
  }
  // Enter, also after an abort, and out of an abort's reach: a lane's ring
  // attach and detach run to their end when another lane failed (an attach
  // cut off could leave the ring mapped with its id unknown), not after a
  // Cancel.
  bool EnterUnlessCancelled(grpc::ClientContext* ctx) {
    absl::MutexLock l(&mu);
    if (cancelled) return false;
    unabortable.push_back(ctx);
    return true;
  }
  void Leave(grpc::ClientContext* ctx) {
    absl::MutexLock l(&mu);
    active.erase(std::remove(active.begin(), active.end(), ctx), active.end());
    unabortable.erase(std::remove(unabortable.begin(), unabortable.end(), ctx),
                      unabortable.end());
  }
  void Cancel() {
    absl::MutexLock l(&mu);
    cancelled = true;
    for (grpc::ClientContext* c : active) c->TryCancel();
    for (grpc::ClientContext* c : unabortable) c->TryCancel();
  }
  // One lane failed: the write's other calls stop (the first failure is the
  // write's).
  void Abort() {
    absl::MutexLock l(&mu);
    aborted = true;
    for (grpc::ClientContext* c : active) c->TryCancel();
  }
  bool IsCancelled() {
    absl::MutexLock l(&mu);
    return cancelled;
  }
};

namespace {

absl::Status Cancelled() {
  return absl::CancelledError(
      "the write to the GPU was cancelled (its provisioning was called off)");
}

// A window of one chunk (the 4 KiB trip): everything on the calling thread,
// one unary doorbell.
absl::Status WriteOneChunk(const WindowPlan& p, const v1::AttachBounceRequest& attach,
                           v1::Device::Stub& stub, H2dCancelPoint& cancel,
                           double* source_seconds, std::vector<Tag>* tags) {
  auto cipher = ChannelCipher::Create(*p.key);
  if (!cipher.ok()) return cipher.status();
  std::vector<uint8_t> staging;
  uint8_t tag[kGcmTagSize];
  absl::Status st = EncryptChunk(p, **cipher, 0, staging, p.Slot(0), tag, source_seconds);
  Zeroize(staging.data(), staging.size());
  if (!st.ok()) return st;
  // One call: the device maps the ring, decrypts the chunk and unmaps the
  // ring, whatever becomes of the chunk. (Should the call fail on the way
  // back, the device drops every ring at its next key exchange anyway.)
  p.StageTag(0, tag);
  v1::SubmitH2DRequest req = p.Doorbell(0, 0);
  *req.mutable_attach() = attach;
  v1::SubmitH2DResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (!cancel.Enter(&ctx)) return Cancelled();
  cancel.wait.Rang();
  st = FromGrpc(stub.SubmitH2D(&ctx, req, &resp), "GPU SubmitH2D");
  cancel.wait.Acked();
  cancel.Leave(&ctx);
  // A chunk that landed before the cancel is a success; a call the cancel
  // stopped is CANCELLED.
  if (st.code() == absl::StatusCode::kCancelled && cancel.IsCancelled()) return Cancelled();
  if (!st.ok()) return st;
  tags->push_back(Tag());
  std::copy(tag, tag + kGcmTagSize, tags->back().begin());
  return absl::OkStatus();
}

// A window of several chunks: `threads` workers and one SubmitH2DStream.
//
// Workers take chunk indices in counter order (an atomic counter), wait until
// the chunk's slot (i % slots) is free, encrypt into it and mark it ready. The
// worker that finds no doorbell being rung becomes the ringer and writes the
// doorbells of every ready chunk in counter order, so there is no submitter
// thread to wake. The calling thread reads the device's acks (one per chunk,
// in order), adds each tag to the digest and frees the slot.
//
// Each slot has its own condition variable, notified once per ack with
// notify_one: at most one worker ever waits on a slot. (A worker waiting for
// slot s to carry chunk i needs chunk i - slots acked; another worker could
// only take chunk i + slots after finishing one of chunks i+1 .. i+slots-1,
// which needs an ack that comes after chunk i - slots's, since acks come in
// order and slots > threads.)
class StreamPipeline {
 public:
  StreamPipeline(const WindowPlan& plan, uint32_t slots, int threads)
      : p_(plan), slots_(slots), threads_(threads), slot_free_(slots),
        ready_(slots, -1), tags_(slots) {}

  // `*released` is set once the device acknowledged the last chunk, whose
  // doorbell released the ring. The chunks' tags go to `*tags`, in order.
  absl::Status Run(v1::Device::Stub& stub, H2dCancelPoint& cancel, double* source_seconds,
                   bool* released, std::vector<Tag>* tags) {
    std::vector<std::unique_ptr<ChannelCipher>> ciphers;
    for (int t = 0; t < threads_; ++t) {
      auto c = ChannelCipher::Create(*p_.key);
      if (!c.ok()) return c.status();
      ciphers.push_back(std::move(*c));
    }
    // Generous: a stalled device is also cut off by the orchestrator's
    // holder watchdog long before this.
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30) +
                      std::chrono::microseconds(p_.length));
    // Cancel() cancels the stream: the ack reader wakes, and with it the
    // workers waiting for a slot.
    if (!cancel.Enter(&ctx_)) return Cancelled();
    wait_ = &cancel.wait;
    struct Leave {
      H2dCancelPoint& c;
      grpc::ClientContext* ctx;
      ~Leave() { c.Leave(ctx); }
    } leave{cancel, &ctx_};
    stream_ = stub.SubmitH2DStream(&ctx_);
    std::vector<double> seconds(threads_, 0);
    std::vector<std::thread> workers;
    workers.reserve(threads_);
    for (int t = 0; t < threads_; ++t) {
      workers.emplace_back([this, t, &ciphers, &seconds] { Work(*ciphers[t], &seconds[t]); });
    }

    uint64_t acked = 0;
    while (acked < p_.n_chunks) {
      v1::SubmitH2DAck ack;
      if (!stream_->Read(&ack)) break;  // the device ended the stream
      const uint32_t s = static_cast<uint32_t>(acked % slots_);
      const uint32_t ring_slot = p_.slot_base + s;
      // The copy engine stops at the last counter (it then refuses the key).
      const uint64_t next = std::min<uint64_t>(uint64_t{p_.window.first} + acked + 1,
                                               kLastMessageCounter);
      bool early;
      {
        std::lock_guard<std::mutex> l(mu_);
        early = acked >= rung_;  // an ack for a chunk whose doorbell was not rung
      }
      if (early) {
        Fail(absl::InternalError(
            "the GPU acknowledged chunk " + std::to_string(acked) +
            " before its doorbell was rung: whatever answers on the device socket is not "
            "the copy engine this writer is feeding"));
        break;
      }
      if (ack.sequence() != acked || ack.slot() != ring_slot || ack.next_counter() != next) {
        Fail(absl::InternalError(
            "the GPU acknowledged chunk " + std::to_string(ack.sequence()) + " (slot " +
            std::to_string(ack.slot()) + ", next counter " +
            std::to_string(ack.next_counter()) + ") where chunk " + std::to_string(acked) +
            " was due: the copy engine and this writer disagree on the window"));
        break;
      }
      std::lock_guard<std::mutex> l(mu_);
      tags->push_back(tags_[s]);  // the slot is reused only after this ack
      acked_ = ++acked;
      wait_->Acked();
      slot_free_[s].notify_one();
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
      for (auto& cv : slot_free_) cv.notify_all();
    }
    for (auto& w : workers) w.join();
    for (int t = 0; t < threads_; ++t) *source_seconds += seconds[t];
    // Every worker is gone, so nothing else touches the stream now.
    grpc::Status fs = stream_->Finish();
    // What went wrong first wins: a failure on this side, then the device's
    // own status, unless it is the cancel's.
    if (!error_.ok()) return error_;
    if (!fs.ok()) {
      if (fs.error_code() == grpc::StatusCode::CANCELLED && cancel.IsCancelled()) {
        return Cancelled();
      }
      return FromGrpc(fs, "GPU SubmitH2DStream");
    }
    if (acked < p_.n_chunks) {
      if (cancel.IsCancelled()) return Cancelled();
      return absl::InternalError("the GPU ended the doorbell stream after " +
                                 std::to_string(acked) + " of " +
                                 std::to_string(p_.n_chunks) + " chunks without an error");
    }
    *released = true;
    return absl::OkStatus();
  }

 private:
  void Work(ChannelCipher& cipher, double* source_seconds) {
    std::vector<uint8_t> staging;  // copying sources only; private memory
    for (;;) {
      const uint32_t i = next_chunk_.fetch_add(1);
      if (i >= p_.n_chunks) break;
      const uint32_t s = i % slots_;
      {
        std::unique_lock<std::mutex> l(mu_);
        slot_free_[s].wait(l, [&] { return stop_ || i < acked_ + slots_; });
        if (stop_) break;
      }
      uint8_t tag[kGcmTagSize];
      absl::Status st = EncryptChunk(p_, cipher, i, staging, p_.Slot(s), tag, source_seconds);
      if (!st.ok()) {
        Fail(st);
        break;
      }
      p_.StageTag(s, tag);
      Ring(i, s, tag);
    }
    Zeroize(staging.data(), staging.size());
  }

  // Marks chunk i ready and, unless another worker is already ringing, rings
  // every ready doorbell in counter order.
  void Ring(uint32_t i, uint32_t s, const uint8_t* tag) {
    std::unique_lock<std::mutex> l(mu_);
    std::copy(tag, tag + kGcmTagSize, tags_[s].begin());
    ready_[s] = i;
    if (ringing_) return;  // the ringer picks it up before it lets go
    ringing_ = true;
    while (!stop_ && next_doorbell_ < p_.n_chunks &&
           ready_[next_doorbell_ % slots_] == int64_t{next_doorbell_}) {
      const uint32_t k = next_doorbell_;
      const uint32_t ks = k % slots_;
      ready_[ks] = -1;
      v1::SubmitH2DRequest req = p_.Doorbell(k, ks);
      rung_ = k + 1;  // before the write: its ack can come before it returns
      wait_->Rang();
      l.unlock();
      const bool last = k + 1 == p_.n_chunks;
      // The last doorbell also half-closes: the device then ends the stream.
      const bool ok = last ? stream_->Write(req, grpc::WriteOptions().set_last_message())
                           : stream_->Write(req);
      l.lock();
      if (!ok) {
        // The stream is over (the device refused a chunk, or the call was
        // cancelled): the ack reader learns why from Finish.
        stop_ = true;
        for (auto& cv : slot_free_) cv.notify_all();
        break;
      }
      ++next_doorbell_;
    }
    ringing_ = false;
  }

  // A failure on this side: stop everyone and cancel the call, which also
  // wakes the ack reader.
  void Fail(absl::Status st) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (error_.ok()) error_ = std::move(st);
      stop_ = true;
      for (auto& cv : slot_free_) cv.notify_all();
    }
    ctx_.TryCancel();
  }

  const WindowPlan& p_;
  const uint32_t slots_;
  const int threads_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SubmitH2DRequest, v1::SubmitH2DAck>> stream_;
  std::atomic<uint32_t> next_chunk_{0};

  std::mutex mu_;
  std::vector<std::condition_variable> slot_free_;  // one per slot
  uint64_t acked_ = 0;               // chunks the device acknowledged
  std::vector<int64_t> ready_;       // per slot: encrypted chunk awaiting its doorbell
  std::vector<Tag> tags_;  // per slot
  uint32_t next_doorbell_ = 0;
  uint64_t rung_ = 0;  // doorbells handed to the stream (an ack needs one)
  DeviceWaitClock* wait_ = nullptr;  // the writer's, set by Run
  bool ringing_ = false;
  bool stop_ = false;
  absl::Status error_;  // first failure on this side
};

}  // namespace

H2dWriter::H2dWriter(std::shared_ptr<grpc::Channel> device, H2dWriterOptions options)
    : stub_(v1::Device::NewStub(device)),
      options_(std::move(options)),
      cancel_(std::make_unique<H2dCancelPoint>()) {}

H2dWriter::~H2dWriter() = default;

void H2dWriter::Cancel() { cancel_->Cancel(); }

absl::Duration H2dWriter::DeviceWait() const { return cancel_->wait.Wait(); }

uint32_t H2dWriter::ChunksFor(uint64_t length, uint32_t chunk_size) {
  return static_cast<uint32_t>((length + chunk_size - 1) / chunk_size);
}

H2dWriter::Plan H2dWriter::PlanFor(uint64_t length, const H2dWriterOptions& options) {
  const uint32_t n_chunks = ChunksFor(length, options.chunk_size);
  Plan p;
  p.threads = static_cast<int>(
      std::min<uint64_t>(std::clamp(options.threads, 1, kMaxWriterThreads), n_chunks));
  // One slot per worker plus one at the device; never more than there are
  // chunks. A one-chunk window needs no more than its own rounded-up size.
  p.slots = std::min<uint32_t>(std::max<uint32_t>(options.slots, p.threads + 1), n_chunks);
  p.slot_size = n_chunks == 1 ? static_cast<uint32_t>((length + 31) / 32 * 32)
                              : options.chunk_size;
  return p;
}

absl::StatusOr<H2dWriteStats> H2dWriter::Write(
    const ChannelMaterial& key, uint64_t session_id, uint64_t buffer_id,
    uint64_t dest_offset, uint64_t length, CounterWindow window,
    const ChunkSource& source) {
  CopyingSource copying(source);
  return Write(key, session_id, buffer_id, dest_offset, length, window, copying);
}

absl::StatusOr<H2dWriteStats> H2dWriter::Write(
    const ChannelMaterial& key, uint64_t session_id, uint64_t buffer_id,
    uint64_t dest_offset, uint64_t length, CounterWindow window, H2dSource& source) {
  std::vector<H2dLaneWrite> one(1);
  one[0].key = &key;
  one[0].window = window;
  one[0].length = length;
  return Write(one, session_id, buffer_id, dest_offset, length, source);
}

std::vector<H2dWriter::Plan> H2dWriter::PlanLanes(const std::vector<uint64_t>& lane_lengths,
                                                  const H2dWriterOptions& options) {
  const size_t k = lane_lengths.size();
  std::vector<Plan> plans;
  if (k == 1) {
    plans.push_back(PlanFor(lane_lengths[0], options));
    return plans;
  }
  // The workers are shared out among the lanes (at least one each), and so
  // is the ring's depth (at least one slot per worker plus one at the
  // device); every slot is a whole chunk.
  const int total = std::clamp(options.threads, 1, kMaxWriterThreads);
  for (size_t i = 0; i < k; ++i) {
    H2dWriterOptions o = options;
    o.threads = std::max<int>(1, total / static_cast<int>(k) +
                                     (static_cast<int>(i) < total % static_cast<int>(k)));
    o.slots = std::max<uint32_t>(1, options.slots / static_cast<uint32_t>(k));
    Plan p = PlanFor(lane_lengths[i], o);
    p.slot_size = options.chunk_size;
    plans.push_back(p);
  }
  return plans;
}

namespace {

// One lane's writing: attach its view of the ring (unless its one chunk's
// doorbell does), run its chunks, release the ring.
absl::Status WriteLane(const WindowPlan& base, const H2dWriter::Plan& geometry,
                       const v1::AttachBounceRequest& attach, v1::Device::Stub& stub,
                       H2dCancelPoint& cancel, double* source_seconds,
                       std::vector<Tag>* tags) {
  WindowPlan plan = base;
  if (plan.n_chunks == 1) {
    return WriteOneChunk(plan, attach, stub, cancel, source_seconds, tags);
  }
  {
    v1::AttachBounceResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!cancel.EnterUnlessCancelled(&ctx)) return Cancelled();
    absl::Status s = FromGrpc(stub.AttachBounce(&ctx, attach, &resp), "GPU AttachBounce");
    cancel.Leave(&ctx);
    if (!s.ok()) {
      // A cancelled attach: the ring, if mapped, goes with the session or
      // the route.
      return s.code() == absl::StatusCode::kCancelled && cancel.IsCancelled() ? Cancelled()
                                                                              : s;
    }
    plan.bounce_id = resp.bounce_id();
  }
  bool released = false;
  absl::Status st = StreamPipeline(plan, geometry.slots, geometry.threads)
                        .Run(stub, cancel, source_seconds, &released, tags);
  if (!released) {
    // The last doorbell never reached the device. Best effort: the device
    // also drops rings when the session ends.
    v1::DetachBounceRequest dreq;
    dreq.set_bounce_id(plan.bounce_id);
    v1::DetachBounceResponse dresp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (cancel.EnterUnlessCancelled(&ctx)) {  // not after a Cancel: the device may be stalled
      (void)stub.DetachBounce(&ctx, dreq, &dresp);
      cancel.Leave(&ctx);
    }
  }
  return st;
}

}  // namespace

absl::StatusOr<H2dWriteStats> H2dWriter::Write(const std::vector<H2dLaneWrite>& lanes,
                                               uint64_t session_id, uint64_t buffer_id,
                                               uint64_t dest_offset, uint64_t length,
                                               H2dSource& source) {
  if (cancel_->IsCancelled()) return Cancelled();  // nothing is read or encrypted
  const uint32_t cs = options_.chunk_size;
  if (cs == 0 || cs % 32 != 0) {
    return absl::InvalidArgumentError("chunk size must be a multiple of 32 bytes");
  }
  if (dest_offset % 32 != 0) {
    return absl::InvalidArgumentError("destination offset must be 32-byte aligned");
  }
  if (length == 0) {
    return absl::InvalidArgumentError("the window is empty: there is nothing to write");
  }
  if (lanes.empty() || lanes.size() > kCopyEngines) {
    return absl::InvalidArgumentError("a window is written through 1 to " +
                                      std::to_string(kCopyEngines) + " copy engines, not " +
                                      std::to_string(lanes.size()));
  }
  // The lanes tile the window in order, on chunk boundaries, each with one
  // counter per chunk in a usable window.
  uint64_t at = 0;
  std::vector<uint64_t> lane_lengths;
  for (size_t i = 0; i < lanes.size(); ++i) {
    const H2dLaneWrite& l = lanes[i];
    const std::string name = "lane " + std::to_string(i) + " (LCE" + std::to_string(l.engine) + ")";
    if (l.key == nullptr) return absl::InvalidArgumentError(name + " has no key");
    if (l.offset != at || l.offset % cs != 0 || l.length == 0 || l.length > length - at) {
      return absl::InvalidArgumentError(
          name + " [" + std::to_string(l.offset) + ", +" + std::to_string(l.length) +
          ") does not follow the previous lane on a chunk boundary inside the window");
    }
    const uint32_t n_chunks = ChunksFor(l.length, cs);
    if (n_chunks != l.window.count) {
      return absl::InvalidArgumentError(
          name + ": counter window holds " + std::to_string(l.window.count) + " counters but " +
          std::to_string(l.length) + " bytes need " + std::to_string(n_chunks) + " chunks");
    }
    // Counters are 32-bit: a window must not start at 0 or wrap past the
    // last one, or two chunks would share an IV (P4 rests on this too, not
    // only on the orchestrator that cut the window).
    auto usable = CounterWindowAt(l.window.first, l.window.count);
    if (!usable.ok()) {
      // Its own code: RESOURCE_EXHAUSTED where only a fresh key exchange helps.
      return absl::Status(usable.status().code(),
                          name + ": counter window [" + std::to_string(l.window.first) + ", +" +
                              std::to_string(l.window.count) + ") cannot be used: " +
                              std::string(usable.status().message()));
    }
    lane_lengths.push_back(l.length);
    at += l.length;
  }
  if (at != length) {
    return absl::InvalidArgumentError("the lanes cover " + std::to_string(at) + " of the " +
                                      std::to_string(length) + " bytes to write");
  }
  const std::vector<Plan> plans = PlanLanes(lane_lengths, options_);
  std::vector<uint32_t> bases;
  uint32_t slots = 0;
  for (const Plan& p : plans) {
    bases.push_back(slots);
    slots += p.slots;
  }
  const uint32_t slot_size = plans[0].slot_size;
  auto t0 = Clock::now();
  // Without the holder's pool, a pool for this write alone: its ring is
  // removed when the write ends.
  std::unique_ptr<BouncePool> own_pool;
  BouncePool* pool = options_.pool;
  if (pool == nullptr) {
    own_pool = std::make_unique<BouncePool>(options_.bounce_dir);
    pool = own_pool.get();
  }
  // One ring for the write; each lane uses its own slots of it, through a
  // mapping of its own (a lane's doorbells release only that mapping).
  auto lease = pool->Acquire(slots, slot_size);
  if (!lease.ok()) return lease.status();
  BounceBuffer* ring = lease->ring();
  v1::AttachBounceRequest attach;
  attach.set_path(ring->path());
  attach.set_slots(slots);
  attach.set_slot_size(slot_size);

  cancel_->Begin();
  const size_t k = lanes.size();
  std::vector<std::vector<Tag>> tags(k);
  std::vector<double> seconds(k, 0);
  std::vector<absl::Status> results(k);
  absl::Mutex first_mu;
  absl::Status first;  // the first lane failure in time is the write's
  auto run = [&](size_t i) {
    const H2dLaneWrite& l = lanes[i];
    WindowPlan plan{l.key,     l.engine, session_id, buffer_id, dest_offset + l.offset,
                    l.offset,  l.length, l.window,   cs,        ChunksFor(l.length, cs),
                    0,         ring,     bases[i],   &source};
    results[i] = WriteLane(plan, plans[i], attach, *stub_, *cancel_, &seconds[i], &tags[i]);
    if (!results[i].ok()) {
      {
        absl::MutexLock l(&first_mu);
        if (first.ok()) first = results[i];
      }
      cancel_->Abort();
    }
  };
  std::vector<std::thread> others;
  for (size_t i = 1; i < k; ++i) others.emplace_back(run, i);
  run(0);
  for (auto& t : others) t.join();
  cancel_->wait.Clear();  // every lane is over
  if (!first.ok()) {
    if (cancel_->IsCancelled()) return Cancelled();
    return first;
  }
  // The window's digest: every chunk's tag in window order (lane by lane),
  // whatever the number of lanes.
  TagDigest digest;
  uint64_t chunks = 0;
  double source_seconds = 0;
  for (size_t i = 0; i < k; ++i) {
    for (const Tag& t : tags[i]) digest.Add(t.data());
    chunks += tags[i].size();
    source_seconds += seconds[i];
  }
  auto d = digest.Final();
  if (!d.ok()) return d.status();
  H2dWriteStats stats;
  stats.bytes = length;
  stats.chunks = chunks;
  stats.digest = std::move(*d);
  stats.read_seconds = source_seconds;
  stats.total_seconds = Since(t0);
  stats.zero_copy = source.CanView();
  return stats;
}

}  // namespace gputravel
