#include "bench/stage_pipeline.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/stats.h"
#include "device/bounce_buffer.h"
#include "keyxfer/device_session.h"
#include "keyxfer/random.h"
#include "keyxfer/secret_bytes.h"
#include "util/files.h"

namespace gputravel {
namespace bench {
namespace {

// Must equal the label in device/h2d_writer.cc (checked by the test through
// WindowDigest).
constexpr char kDigestLabel[] = "gputravel-window-digest-v1";

}  // namespace

absl::StatusOr<StageResult> RunEncryptAndStage(const ChannelMaterial& key,
                                               uint64_t session_id,
                                               uint64_t buffer_id,
                                               uint64_t length,
                                               uint32_t first_counter,
                                               H2dSource& source,
                                               const StageOptions& options) {
  const uint32_t cs = options.chunk_size;
  if (cs == 0 || cs % 32 != 0 || length == 0) {
    return absl::InvalidArgumentError("chunk size must be a non-zero multiple of 32");
  }
  const uint32_t n_chunks = H2dWriter::ChunksFor(length, cs);
  // Threads and ring exactly as H2dWriter::Write chooses them.
  H2dWriterOptions wo;
  wo.chunk_size = cs;
  wo.slots = options.slots;
  wo.threads = options.threads;
  const H2dWriter::Plan geometry = H2dWriter::PlanFor(length, wo);
  const int threads = geometry.threads;
  const uint32_t slots = geometry.slots;
  const bool viewable = source.CanView();
  auto chunk_len = [&](uint32_t i) -> uint32_t {
    return static_cast<uint32_t>(std::min<uint64_t>(cs, length - uint64_t{i} * cs));
  };
  std::vector<std::unique_ptr<ChannelCipher>> ciphers;
  for (int t = 0; t < threads; ++t) {
    auto c = ChannelCipher::Create(key);
    if (!c.ok()) return c.status();
    ciphers.push_back(std::move(*c));
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> md(EVP_MD_CTX_new(),
                                                             &EVP_MD_CTX_free);
  EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr);
  EVP_DigestUpdate(md.get(), kDigestLabel, sizeof(kDigestLabel) - 1);

  auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = ProcessCpuSeconds();
  std::unique_ptr<BouncePool> own_pool;
  BouncePool* pool = options.pool;
  if (pool == nullptr) {
    own_pool = std::make_unique<BouncePool>(options.bounce_dir);
    pool = own_pool.get();
  }
  auto lease = pool->Acquire(slots, geometry.slot_size);
  if (!lease.ok()) return lease.status();
  BounceBuffer* ring = lease->ring();

  std::atomic<uint32_t> next_chunk{0};
  std::mutex mu;
  std::vector<std::condition_variable> slot_free(slots);  // one waiter at most each
  uint64_t acked = 0;
  std::vector<int64_t> ready(slots, -1);
  std::vector<std::array<uint8_t, kGcmTagSize>> tags(slots);
  uint32_t next_doorbell = 0;
  bool ringing = false, stop = false;
  absl::Status error;
  std::vector<double> read_s(threads, 0), encrypt_s(threads, 0), zeroize_s(threads, 0);

  auto fail = [&](absl::Status st) {
    std::lock_guard<std::mutex> l(mu);
    if (error.ok()) error = std::move(st);
    stop = true;
    for (auto& cv : slot_free) cv.notify_all();
  };
  // The ringer's loop, with the device's ack folded in: hand over, digest,
  // free the slot.
  auto ring_ready = [&](uint32_t i, uint32_t s, const uint8_t* tag) {
    std::unique_lock<std::mutex> l(mu);
    std::copy(tag, tag + kGcmTagSize, tags[s].begin());
    ready[s] = i;
    if (ringing) return;
    ringing = true;
    while (!stop && next_doorbell < n_chunks &&
           ready[next_doorbell % slots] == int64_t{next_doorbell}) {
      const uint32_t ks = next_doorbell % slots;
      ready[ks] = -1;
      EVP_DigestUpdate(md.get(), tags[ks].data(), kGcmTagSize);
      acked = ++next_doorbell;
      slot_free[ks].notify_one();
    }
    ringing = false;
  };

  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<uint8_t> staging;
      for (;;) {
        const uint32_t i = next_chunk.fetch_add(1);
        if (i >= n_chunks) break;
        const uint32_t s = i % slots;
        {
          std::unique_lock<std::mutex> l(mu);
          slot_free[s].wait(l, [&] { return stop || i < acked + slots; });
          if (stop) break;
        }
        const uint32_t n = chunk_len(i);
        auto r0 = std::chrono::steady_clock::now();
        PlaintextView view;
        const uint8_t* in = nullptr;
        if (viewable) {
          auto v = source.View(uint64_t{i} * cs, n);
          if (!v.ok()) {
            fail(v.status());
            break;
          }
          view = std::move(*v);
          in = view.data();
        } else {
          if (staging.size() < n) staging.resize(cs);
          absl::Status st = source.Read(uint64_t{i} * cs, staging.data(), n);
          if (!st.ok()) {
            fail(st);
            break;
          }
          in = staging.data();
        }
        auto e0 = std::chrono::steady_clock::now();
        read_s[t] += std::chrono::duration<double>(e0 - r0).count();
        std::string aad = ChunkAad(session_id, buffer_id, uint64_t{i} * cs, n);
        uint8_t tag[kGcmTagSize];
        // As H2dWriter: the ring is shared with the host (EncryptToShared).
        absl::Status st = ciphers[t]->EncryptToShared(
            first_counter + i, reinterpret_cast<const uint8_t*>(aad.data()), aad.size(),
            in, n, ring->slot(s), tag);
        view.Reset();
        encrypt_s[t] += SecondsSince(e0);
        if (!st.ok()) {
          fail(st);
          break;
        }
        std::memcpy(ring->tag(s), tag, kGcmTagSize);  // as H2dWriter: the tag area
        ring_ready(i, s, tag);
      }
      auto z0 = std::chrono::steady_clock::now();
      Zeroize(staging.data(), staging.size());
      zeroize_s[t] += SecondsSince(z0);
    });
  }
  for (auto& w : workers) w.join();
  if (!error.ok()) return error;
  if (acked != n_chunks) return absl::InternalError("stage pipeline stopped early");

  StageResult r;
  r.seconds = SecondsSince(t0);
  r.cpu_seconds = ProcessCpuSeconds() - cpu0;
  r.bytes = length;
  r.chunks = n_chunks;
  r.mbps = MegabytesPerSecond(length, r.seconds);
  r.zero_copy = viewable;
  for (int t = 0; t < threads; ++t) {
    r.read_seconds += read_s[t];
    r.encrypt_seconds += encrypt_s[t];
    r.zeroize_seconds += zeroize_s[t];
  }
  unsigned char out[32];
  unsigned int len = 0;
  EVP_DigestFinal_ex(md.get(), out, &len);
  r.digest.assign(reinterpret_cast<char*>(out), len);
  return r;
}

absl::StatusOr<StageResult> RunEncryptAndStage(const ChannelMaterial& key,
                                               uint64_t session_id,
                                               uint64_t buffer_id,
                                               uint64_t length,
                                               uint32_t first_counter,
                                               const ChunkSource& source,
                                               const StageOptions& options) {
  CopyingSource copying(source);
  return RunEncryptAndStage(key, session_id, buffer_id, length, first_counter, copying,
                            options);
}

}  // namespace bench
}  // namespace gputravel
