#include "bench/stage_pipeline.h"

#include <openssl/evp.h>

#include <chrono>
#include <condition_variable>
#include <deque>
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
                                               const ChunkSource& source,
                                               const StageOptions& options) {
  const uint32_t cs = options.chunk_size;
  if (cs == 0 || cs % 32 != 0 || length == 0) {
    return absl::InvalidArgumentError("chunk size must be a non-zero multiple of 32");
  }
  const int64_t n_chunks = static_cast<int64_t>(H2dWriter::ChunksFor(length, cs));
  const int threads = std::max(1, options.threads);
  const uint32_t slots = std::max<uint32_t>(options.slots, threads + 1);
  auto chunk_len = [&](int64_t i) -> uint32_t {
    return static_cast<uint32_t>(std::min<uint64_t>(cs, length - uint64_t(i) * cs));
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
  auto ring = BounceBuffer::Create(
      options.bounce_dir + "/gputravel-bench-" + HexEncode(RandomString(8)), slots, cs);
  if (!ring.ok()) return ring.status();
  (*ring)->Unlink();  // nobody else maps it; the mapping stays valid

  struct Slot {
    std::vector<uint8_t> staging;
    uint8_t tag[kGcmTagSize];
    int64_t chunk = -1;
    bool encrypted = false;
  };
  std::vector<Slot> ring_state(slots);
  for (auto& sl : ring_state) sl.staging.resize(cs);
  std::mutex mu;
  std::condition_variable cv;
  std::deque<uint32_t> work;
  absl::Status error;
  bool stop = false;
  std::vector<double> encrypt_s(threads, 0), zeroize_s(threads, 0);

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
        const int64_t i = sl.chunk;
        const uint32_t n = chunk_len(i);
        auto e0 = std::chrono::steady_clock::now();
        std::string aad = ChunkAad(session_id, buffer_id, uint64_t(i) * cs, n);
        absl::Status st = ciphers[t]->Encrypt(
            first_counter + static_cast<uint32_t>(i),
            reinterpret_cast<const uint8_t*>(aad.data()), aad.size(),
            sl.staging.data(), n, (*ring)->slot(s), sl.tag);
        auto z0 = std::chrono::steady_clock::now();
        Zeroize(sl.staging.data(), n);
        encrypt_s[t] += std::chrono::duration<double>(z0 - e0).count();
        zeroize_s[t] += SecondsSince(z0);
        std::lock_guard<std::mutex> l(mu);
        if (!st.ok() && error.ok()) error = st;
        sl.encrypted = true;
        cv.notify_all();
      }
    });
  }

  // Submitter: consumes strictly in counter order, as the doorbell thread
  // does, but hands the slot back at once (no device).
  std::thread submitter([&] {
    for (int64_t i = 0; i < n_chunks; ++i) {
      const uint32_t s = static_cast<uint32_t>(i % slots);
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] {
        return !error.ok() || (ring_state[s].chunk == i && ring_state[s].encrypted);
      });
      if (!error.ok()) return;
      EVP_DigestUpdate(md.get(), ring_state[s].tag, kGcmTagSize);
      ring_state[s].chunk = -1;
      ring_state[s].encrypted = false;
      cv.notify_all();
    }
  });

  double read_s = 0;
  for (int64_t i = 0; i < n_chunks; ++i) {
    const uint32_t s = static_cast<uint32_t>(i % slots);
    {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return !error.ok() || ring_state[s].chunk == -1; });
      if (!error.ok()) break;
    }
    auto r0 = std::chrono::steady_clock::now();
    absl::Status st = source(uint64_t(i) * cs, ring_state[s].staging.data(), chunk_len(i));
    read_s += SecondsSince(r0);
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
  if (!error.ok()) return error;

  StageResult r;
  r.seconds = SecondsSince(t0);
  r.cpu_seconds = ProcessCpuSeconds() - cpu0;
  r.bytes = length;
  r.chunks = static_cast<uint64_t>(n_chunks);
  r.mbps = MegabytesPerSecond(length, r.seconds);
  r.read_seconds = read_s;
  for (int t = 0; t < threads; ++t) {
    r.encrypt_seconds += encrypt_s[t];
    r.zeroize_seconds += zeroize_s[t];
  }
  unsigned char out[32];
  unsigned int len = 0;
  EVP_DigestFinal_ex(md.get(), out, &len);
  r.digest.assign(reinterpret_cast<char*>(out), len);
  return r;
}

}  // namespace bench
}  // namespace gputravel
