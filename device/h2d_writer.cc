#include "device/h2d_writer.h"

#include <openssl/evp.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "device/bounce_buffer.h"
#include "keyxfer/device_session.h"
#include "keyxfer/random.h"
#include "keyxfer/secret_bytes.h"
#include "util/files.h"
#include "util/grpc_status.h"

namespace gputravel {
namespace {

constexpr char kDigestLabel[] = "gputravel-window-digest-v1";

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class TagDigest {
 public:
  TagDigest() {
    ctx_ = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr);
    EVP_DigestUpdate(ctx_, kDigestLabel, sizeof(kDigestLabel) - 1);
  }
  ~TagDigest() { EVP_MD_CTX_free(ctx_); }
  void Add(const uint8_t* tag) { EVP_DigestUpdate(ctx_, tag, kGcmTagSize); }
  std::string Final() {
    unsigned char out[32];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_, out, &len);
    return std::string(reinterpret_cast<char*>(out), len);
  }

 private:
  EVP_MD_CTX* ctx_;
};

}  // namespace

uint32_t H2dWriter::ChunksFor(uint64_t length, uint32_t chunk_size) {
  return static_cast<uint32_t>((length + chunk_size - 1) / chunk_size);
}

absl::StatusOr<H2dWriteStats> H2dWriter::Write(
    const ChannelMaterial& key, uint64_t session_id, uint64_t buffer_id,
    uint64_t dest_offset, uint64_t length, CounterWindow window,
    const ChunkSource& source) {
  const uint32_t cs = options_.chunk_size;
  if (cs == 0 || cs % 32 != 0) {
    return absl::InvalidArgumentError("chunk size must be a multiple of 32 bytes");
  }
  if (dest_offset % 32 != 0) {
    return absl::InvalidArgumentError("destination offset must be 32-byte aligned");
  }
  const uint32_t n_chunks = ChunksFor(length, cs);
  if (length == 0 || n_chunks != window.count) {
    return absl::InvalidArgumentError(
        "counter window holds " + std::to_string(window.count) + " counters but " +
        std::to_string(length) + " bytes need " + std::to_string(n_chunks) + " chunks");
  }
  const int threads = std::max(1, options_.threads);
  const uint32_t slots = std::max<uint32_t>(options_.slots, threads + 1);
  auto t0 = std::chrono::steady_clock::now();
  auto ring = BounceBuffer::Create(
      options_.bounce_dir + "/gputravel-bounce-" + HexEncode(RandomString(8)),
      slots, cs);
  if (!ring.ok()) return ring.status();
  {
    v1::AttachBounceRequest req;
    req.set_path((*ring)->path());
    req.set_slots(slots);
    req.set_slot_size(cs);
    v1::AttachBounceResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    absl::Status s = FromGrpc(stub_->AttachBounce(&ctx, req, &resp), "GPU AttachBounce");
    if (!s.ok()) return s;
    const uint64_t bounce_id = resp.bounce_id();

    // Per-slot state. Staging holds plaintext (private memory, zeroized after
    // use); the bounce slot receives only ciphertext.
    struct Slot {
      std::vector<uint8_t> staging;
      uint8_t tag[kGcmTagSize];
      int64_t chunk = -1;  // chunk occupying the slot
      bool encrypted = false;
    };
    std::vector<Slot> ring_state(slots);
    for (auto& sl : ring_state) sl.staging.resize(cs);
    std::mutex mu;
    std::condition_variable cv;
    std::deque<uint32_t> work;  // slots ready to encrypt
    absl::Status error;
    bool stop = false;

    std::vector<std::unique_ptr<ChannelCipher>> ciphers;
    for (int t = 0; t < threads; ++t) {
      auto c = ChannelCipher::Create(key);
      if (!c.ok()) return c.status();
      ciphers.push_back(std::move(*c));
    }
    auto chunk_len = [&](int64_t i) -> uint32_t {
      uint64_t off = uint64_t(i) * cs;
      return static_cast<uint32_t>(std::min<uint64_t>(cs, length - off));
    };
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        for (;;) {
          uint32_t s;
          {
            std::unique_lock<std::mutex> l(mu);
            cv.wait(l, [&] { return stop || !work.empty(); });
            if (work.empty()) return;
            s = work.front();
            work.pop_front();
          }
          Slot& sl = ring_state[s];
          int64_t i = sl.chunk;
          uint32_t n = chunk_len(i);
          std::string aad = ChunkAad(session_id, buffer_id, dest_offset + uint64_t(i) * cs, n);
          // The staging area (private TD memory) is overwritten by the next
          // read and zeroized when the write ends, not after every chunk:
          // that wipe would sit on the encryption's critical path.
          absl::Status st = ciphers[t]->Encrypt(
              window.first + static_cast<uint32_t>(i),
              reinterpret_cast<const uint8_t*>(aad.data()), aad.size(),
              sl.staging.data(), n, (*ring)->slot(s), sl.tag);
          std::lock_guard<std::mutex> l(mu);
          if (!st.ok() && error.ok()) error = st;
          sl.encrypted = true;
          cv.notify_all();
        }
      });
    }

    TagDigest digest;
    double read_seconds = 0;
    // Submitter: rings doorbells strictly in counter order.
    std::thread submitter([&] {
      for (int64_t i = 0; i < n_chunks; ++i) {
        uint32_t s = static_cast<uint32_t>(i % slots);
        {
          std::unique_lock<std::mutex> l(mu);
          cv.wait(l, [&] {
            return !error.ok() || (ring_state[s].chunk == i && ring_state[s].encrypted);
          });
          if (!error.ok()) return;
        }
        v1::SubmitH2DRequest req;
        req.set_bounce_id(bounce_id);
        req.set_slot(s);
        req.set_buffer_id(buffer_id);
        req.set_offset(dest_offset + uint64_t(i) * cs);
        req.set_length(chunk_len(i));
        req.set_tag(reinterpret_cast<const char*>(ring_state[s].tag), kGcmTagSize);
        req.set_session_id(session_id);
        v1::SubmitH2DResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        absl::Status st = FromGrpc(stub_->SubmitH2D(&ctx, req, &resp), "GPU SubmitH2D");
        std::lock_guard<std::mutex> l(mu);
        if (!st.ok()) {
          if (error.ok()) error = st;
          cv.notify_all();
          return;
        }
        digest.Add(ring_state[s].tag);
        ring_state[s].chunk = -1;
        ring_state[s].encrypted = false;
        cv.notify_all();
      }
    });

    // Reader (this thread): fills free slots in order.
    for (int64_t i = 0; i < n_chunks; ++i) {
      uint32_t s = static_cast<uint32_t>(i % slots);
      {
        std::unique_lock<std::mutex> l(mu);
        cv.wait(l, [&] { return !error.ok() || ring_state[s].chunk == -1; });
        if (!error.ok()) break;
      }
      auto r0 = std::chrono::steady_clock::now();
      absl::Status st = source(uint64_t(i) * cs, ring_state[s].staging.data(), chunk_len(i));
      read_seconds += Since(r0);
      std::lock_guard<std::mutex> l(mu);
      if (!st.ok()) {
        if (error.ok()) error = st;
        cv.notify_all();
        break;
      }
      ring_state[s].chunk = i;
      ring_state[s].encrypted = false;
      work.push_back(s);
      cv.notify_all();
    }
    submitter.join();
    {
      std::lock_guard<std::mutex> l(mu);
      stop = true;
      cv.notify_all();
    }
    for (auto& w : workers) w.join();
    for (auto& sl : ring_state) Zeroize(sl.staging.data(), sl.staging.size());
    {
      // Best effort: the device also drops rings when the session ends.
      v1::DetachBounceRequest dreq;
      dreq.set_bounce_id(bounce_id);
      v1::DetachBounceResponse dresp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      (void)stub_->DetachBounce(&ctx, dreq, &dresp);
    }
    if (!error.ok()) return error;
    H2dWriteStats stats;
    stats.bytes = length;
    stats.chunks = n_chunks;
    stats.digest = digest.Final();
    stats.read_seconds = read_seconds;
    stats.total_seconds = Since(t0);
    return stats;
  }
}

absl::StatusOr<std::string> WindowDigest(const ChannelMaterial& key,
                                         uint64_t session_id, uint64_t buffer_id,
                                         uint64_t dest_offset,
                                         const std::string& plaintext,
                                         uint32_t chunk_size,
                                         uint32_t first_counter) {
  auto cipher = ChannelCipher::Create(key);
  if (!cipher.ok()) return cipher.status();
  TagDigest digest;
  std::vector<uint8_t> scratch(chunk_size);
  for (uint64_t off = 0, i = 0; off < plaintext.size(); off += chunk_size, ++i) {
    uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(chunk_size, plaintext.size() - off));
    std::string aad = ChunkAad(session_id, buffer_id, dest_offset + off, n);
    uint8_t tag[kGcmTagSize];
    absl::Status st = (*cipher)->Encrypt(
        first_counter + static_cast<uint32_t>(i),
        reinterpret_cast<const uint8_t*>(aad.data()), aad.size(),
        reinterpret_cast<const uint8_t*>(plaintext.data()) + off, n, scratch.data(), tag);
    if (!st.ok()) return st;
    digest.Add(tag);
  }
  Zeroize(scratch.data(), scratch.size());
  return digest.Final();
}

}  // namespace gputravel
