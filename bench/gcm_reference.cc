#include "bench/gcm_reference.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "bench/stats.h"
#include "device/bounce_buffer.h"
#include "keyxfer/random.h"
#include "util/files.h"
#include "util/hex.h"

namespace gputravel {
namespace bench {
namespace {

using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

// One whole AEAD operation, either way, with 32 bytes of AAD. The IV is the
// message's number, as a copy engine's counter.
bool GcmOnce(EVP_CIPHER_CTX* ctx, bool encrypt, uint64_t number, const uint8_t* aad,
             const uint8_t* in, size_t n, uint8_t* out, uint8_t tag[16]) {
  uint8_t iv[12] = {0};
  std::memcpy(iv, &number, sizeof(number));
  int len = 0;
  if (encrypt) {
    return EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, iv) == 1 &&
           EVP_EncryptUpdate(ctx, nullptr, &len, aad, 32) == 1 &&
           EVP_EncryptUpdate(ctx, out, &len, in, static_cast<int>(n)) == 1 &&
           EVP_EncryptFinal_ex(ctx, out + n, &len) == 1 &&
           EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag) == 1;
  }
  return EVP_DecryptInit_ex(ctx, nullptr, nullptr, nullptr, iv) == 1 &&
         EVP_DecryptUpdate(ctx, nullptr, &len, aad, 32) == 1 &&
         EVP_DecryptUpdate(ctx, out, &len, in, static_cast<int>(n)) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, tag) == 1 &&
         EVP_DecryptFinal_ex(ctx, out + n, &len) == 1;
}

// Encrypts message k from in(k) to out(k) until `min_seconds` have passed.
absl::StatusOr<GcmReference> EncryptLoop(size_t message_bytes, double min_seconds,
                                         const std::function<const uint8_t*(uint64_t)>& in,
                                         const std::function<uint8_t*(uint64_t)>& out) {
  CipherCtx ctx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
  uint8_t key[32], aad[32], tag[16];
  if (ctx == nullptr || RAND_bytes(key, sizeof(key)) != 1 ||
      RAND_bytes(aad, sizeof(aad)) != 1 ||
      EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key, nullptr) != 1) {
    return absl::InternalError("OpenSSL: cannot set up AES-256-GCM");
  }
  GcmReference r;
  r.message_bytes = message_bytes;
  uint64_t counter = 0;
  auto t0 = std::chrono::steady_clock::now();
  // Check the clock every few messages only, so tiny messages are not
  // dominated by clock reads.
  const uint64_t batch = std::max<uint64_t>(1, (1u << 20) / message_bytes);
  do {
    for (uint64_t b = 0; b < batch; ++b) {
      if (!GcmOnce(ctx.get(), true, ++counter, aad, in(r.messages), message_bytes,
                   out(r.messages), tag)) {
        return absl::InternalError("OpenSSL: AES-256-GCM encryption failed");
      }
      ++r.messages;
    }
    r.seconds = SecondsSince(t0);
  } while (r.seconds < min_seconds);
  r.mbps = MegabytesPerSecond(r.messages * message_bytes, r.seconds);
  return r;
}

absl::Status CheckSize(size_t message_bytes) {
  if (message_bytes == 0 || message_bytes > (size_t{1} << 30)) {
    return absl::InvalidArgumentError("message size must be 1 byte .. 1 GiB");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GcmReference> MeasureGcmReference(size_t message_bytes,
                                                 double min_seconds) {
  absl::Status s = CheckSize(message_bytes);
  if (!s.ok()) return s;
  std::vector<uint8_t> buf(message_bytes);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 131 + 7);
  return EncryptLoop(
      message_bytes, min_seconds, [&](uint64_t) -> const uint8_t* { return buf.data(); },
      [&](uint64_t) { return buf.data(); });
}

absl::StatusOr<GcmReference> MeasureGcmReferenceConcurrent(size_t message_bytes,
                                                           double min_seconds,
                                                           int threads) {
  if (threads < 1 || threads > 64) {
    return absl::InvalidArgumentError("threads must be 1..64");
  }
  std::vector<absl::StatusOr<GcmReference>> results(threads, absl::UnknownError("not run"));
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back(
        [&, t] { results[t] = MeasureGcmReference(message_bytes, min_seconds); });
  }
  for (auto& w : workers) w.join();
  GcmReference sum;
  sum.message_bytes = message_bytes;
  for (const auto& r : results) {
    if (!r.ok()) return r.status();
    sum.messages += r->messages;
    sum.seconds = std::max(sum.seconds, r->seconds);
    sum.mbps += r->mbps;
  }
  return sum;
}

absl::StatusOr<GcmReference> MeasureGcmIntoBounceRing(size_t message_bytes, uint32_t slots,
                                                      const std::string& bounce_dir,
                                                      double min_seconds) {
  absl::Status s = CheckSize(message_bytes);
  if (!s.ok()) return s;
  if (message_bytes % 32 != 0) {
    return absl::InvalidArgumentError("bounce slots are multiples of 32 bytes");
  }
  auto ring = BounceBuffer::Create(
      bounce_dir + "/gputravel-bench-ref-" + HexEncode(RandomString(8)), slots,
      static_cast<uint32_t>(message_bytes));
  if (!ring.ok()) return ring.status();
  (*ring)->Unlink();
  std::vector<std::vector<uint8_t>> staging(slots, std::vector<uint8_t>(message_bytes, 0x5a));
  auto r = EncryptLoop(
      message_bytes, min_seconds,
      [&](uint64_t k) -> const uint8_t* { return staging[k % slots].data(); },
      [&](uint64_t k) { return (*ring)->slot(static_cast<uint32_t>(k % slots)); });
  if (r.ok()) r->into_ring = true;
  return r;
}

absl::StatusOr<GcmReference> MeasureGcmFromLargeSource(size_t message_bytes,
                                                       size_t source_bytes, uint32_t slots,
                                                       const std::string& bounce_dir,
                                                       double min_seconds) {
  absl::Status s = CheckSize(message_bytes);
  if (!s.ok()) return s;
  if (message_bytes % 32 != 0 || source_bytes < message_bytes) {
    return absl::InvalidArgumentError(
        "bounce slots are multiples of 32 bytes and the source holds at least one message");
  }
  auto ring = BounceBuffer::Create(
      bounce_dir + "/gputravel-bench-ref-" + HexEncode(RandomString(8)), slots,
      static_cast<uint32_t>(message_bytes));
  if (!ring.ok()) return ring.status();
  (*ring)->Unlink();
  std::vector<uint8_t> source(source_bytes);
  for (size_t i = 0; i < source.size(); i += 4096) source[i] = static_cast<uint8_t>(i >> 12);
  const uint64_t per_source = source_bytes / message_bytes;
  auto r = EncryptLoop(
      message_bytes, min_seconds,
      [&](uint64_t k) -> const uint8_t* {
        return source.data() + (k % per_source) * message_bytes;
      },
      [&](uint64_t k) { return (*ring)->slot(static_cast<uint32_t>(k % slots)); });
  if (r.ok()) {
    r->into_ring = true;
    r->large_source = true;
  }
  return r;
}

absl::StatusOr<GcmReference> MeasureGcmBothSides(size_t message_bytes, uint64_t window_bytes,
                                                 uint32_t slots, int pairs,
                                                 const std::string& bounce_dir) {
  absl::Status s = CheckSize(message_bytes);
  if (!s.ok()) return s;
  const uint64_t messages = window_bytes / message_bytes;
  if (message_bytes % 32 != 0 || messages == 0 || slots == 0 || pairs < 1 || pairs > 64) {
    return absl::InvalidArgumentError(
        "slots are multiples of 32 bytes, the window holds at least one, and there are 1 to "
        "64 pairs of threads with at least one slot each");
  }
  pairs = static_cast<int>(std::min<uint64_t>(pairs, messages));
  uint8_t key[32], aad[32];
  if (RAND_bytes(key, sizeof(key)) != 1 || RAND_bytes(aad, sizeof(aad)) != 1) {
    return absl::InternalError("OpenSSL: no random key");
  }
  // Each pair's state; the counters are on their own cache lines.
  struct Pair {
    std::unique_ptr<BounceBuffer> ring;
    std::vector<std::array<uint8_t, 16>> tags;
    uint64_t first = 0, count = 0;  // its messages in the window
    alignas(64) std::atomic<uint64_t> encrypted{0};
    alignas(64) std::atomic<uint64_t> decrypted{0};
  };
  std::vector<std::unique_ptr<Pair>> state;
  for (int p = 0; p < pairs; ++p) {
    auto pair = std::make_unique<Pair>();
    pair->first = messages * p / pairs;
    pair->count = messages * (p + 1) / pairs - pair->first;
    auto ring = BounceBuffer::Create(
        bounce_dir + "/gputravel-bench-both-" + HexEncode(RandomString(8)), slots,
        static_cast<uint32_t>(message_bytes));
    if (!ring.ok()) return ring.status();
    (*ring)->Unlink();
    pair->ring = std::move(*ring);
    pair->tags.resize(slots);
    state.push_back(std::move(pair));
  }
  const size_t bytes = messages * message_bytes;
  std::vector<uint8_t> source(bytes), destination(bytes);
  for (size_t i = 0; i < bytes; i += 64) source[i] = static_cast<uint8_t>(i >> 6);
  std::memset(destination.data(), 0, bytes);
  std::atomic<bool> failed{false};
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};

  auto side = [&](Pair& pair, bool encrypt) {
    CipherCtx ctx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
    const bool set_up =
        ctx != nullptr &&
        (encrypt ? EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key, nullptr)
                 : EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key, nullptr)) == 1;
    if (!set_up) failed = true;
    ready.fetch_add(1);
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    for (uint64_t k = 0; k < pair.count && !failed.load(std::memory_order_relaxed); ++k) {
      // The encryptor waits for a free slot, the decryptor for a full one.
      while (!failed.load(std::memory_order_relaxed) &&
             (encrypt ? k - pair.decrypted.load(std::memory_order_acquire) >= pair.tags.size()
                      : pair.encrypted.load(std::memory_order_acquire) <= k)) {
        std::this_thread::yield();
      }
      if (failed.load(std::memory_order_relaxed)) break;
      const uint32_t slot = static_cast<uint32_t>(k % pair.tags.size());
      const size_t offset = (pair.first + k) * message_bytes;
      const bool ok =
          encrypt ? GcmOnce(ctx.get(), true, k, aad, source.data() + offset, message_bytes,
                            pair.ring->slot(slot), pair.tags[slot].data())
                  : GcmOnce(ctx.get(), false, k, aad, pair.ring->slot(slot), message_bytes,
                            destination.data() + offset, pair.tags[slot].data());
      if (!ok) {
        failed = true;
        break;
      }
      (encrypt ? pair.encrypted : pair.decrypted).store(k + 1, std::memory_order_release);
    }
  };
  std::vector<std::thread> threads;
  for (auto& pair : state) {
    threads.emplace_back(side, std::ref(*pair), true);
    threads.emplace_back(side, std::ref(*pair), false);
  }
  while (ready.load() < 2 * pairs) std::this_thread::yield();
  auto t0 = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  GcmReference r;
  r.seconds = SecondsSince(t0);
  if (failed) {
    return absl::InternalError("OpenSSL: AES-256-GCM failed, or a tag did not match, in the "
                               "two-sided reference");
  }
  // The bytes arrived: every message decrypted back to its plaintext.
  if (std::memcmp(source.data(), destination.data(), bytes) != 0) {
    return absl::InternalError("the two-sided reference decrypted something else than it "
                               "encrypted");
  }
  r.message_bytes = message_bytes;
  r.into_ring = true;
  r.large_source = true;
  r.pairs = pairs;
  r.messages = messages;
  r.mbps = MegabytesPerSecond(bytes, r.seconds);
  return r;
}

}  // namespace bench
}  // namespace gputravel
