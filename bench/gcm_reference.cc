#include "bench/gcm_reference.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
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

// Encrypts message k from in(k) to out(k) until `min_seconds` have passed.
absl::StatusOr<GcmReference> EncryptLoop(size_t message_bytes, double min_seconds,
                                         const std::function<const uint8_t*(uint64_t)>& in,
                                         const std::function<uint8_t*(uint64_t)>& out) {
  std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)> ctx(
      EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
  uint8_t key[32], iv[12] = {0}, aad[32], tag[16];
  if (ctx == nullptr || RAND_bytes(key, sizeof(key)) != 1 ||
      RAND_bytes(aad, sizeof(aad)) != 1 ||
      EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key, nullptr) != 1) {
    return absl::InternalError("OpenSSL: cannot set up AES-256-GCM");
  }
  GcmReference r;
  r.message_bytes = message_bytes;
  uint32_t counter = 0;
  auto t0 = std::chrono::steady_clock::now();
  // Check the clock every few messages only, so tiny messages are not
  // dominated by clock reads.
  const uint64_t batch = std::max<uint64_t>(1, (1u << 20) / message_bytes);
  do {
    for (uint64_t b = 0; b < batch; ++b) {
      ++counter;
      std::memcpy(iv, &counter, sizeof(counter));
      int len = 0;
      uint8_t* dst = out(r.messages);
      if (EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr, nullptr, iv) != 1 ||
          EVP_EncryptUpdate(ctx.get(), nullptr, &len, aad, sizeof(aad)) != 1 ||
          EVP_EncryptUpdate(ctx.get(), dst, &len, in(r.messages),
                            static_cast<int>(message_bytes)) != 1 ||
          EVP_EncryptFinal_ex(ctx.get(), dst + message_bytes, &len) != 1 ||
          EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, sizeof(tag), tag) != 1) {
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

}  // namespace bench
}  // namespace gputravel
