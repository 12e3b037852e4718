#include "bench/piece_sizes.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>

#include "bench/gcm_reference.h"
#include "bench/stats.h"
#include "device/bounce_buffer.h"
#include "keyxfer/aes_gcm.h"
#include "keyxfer/random.h"
#include "keyxfer/secret_bytes.h"
#include "util/files.h"
#include "util/hex.h"

namespace gputravel {
namespace bench {
namespace {

constexpr size_t kAadBytes = 32;  // as the reference

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Runs `one(k)` for message k = 0, 1, ... until `seconds` have passed;
// MB/s of `message_bytes` per call.
template <typename F>
absl::StatusOr<double> Loop(size_t message_bytes, double seconds, F one) {
  auto t0 = std::chrono::steady_clock::now();
  uint64_t k = 0;
  double s = 0;
  do {
    absl::Status st = one(k++);
    if (!st.ok()) return st;
    s = SecondsSince(t0);
  } while (s < seconds);
  return MegabytesPerSecond(k * message_bytes, s);
}

}  // namespace

PieceOptions PieceOptions::Full() {
  PieceOptions o;
  // The production sizes first, then 4 KiB (the earlier encrypting piece,
  // with a 64-byte tail past the last 96-byte stride), a multiple of 96
  // below it, and larger pieces of both kinds.
  o.pieces = {AesGcm::kEncryptPiece, 4096, 4032, 6144, 8192, 12288, 16384};
  return o;
}

PieceOptions PieceOptions::Quick() {
  PieceOptions o = Full();
  o.message_sizes = {size_t{64} << 10};
  o.pieces = {AesGcm::kEncryptPiece, 4096};
  o.rounds = 2;
  o.seconds = 0.01;
  o.large_bytes = size_t{1} << 20;
  return o;
}

absl::StatusOr<std::vector<PieceTable>> MeasurePieceSizes(const PieceOptions& options) {
  if (options.message_sizes.empty() || options.pieces.empty()) {
    return absl::InvalidArgumentError("no message size or no piece size to measure");
  }
  if (options.rounds < 1 || options.rounds > 100) {
    return absl::InvalidArgumentError("rounds must be 1..100");
  }
  if (options.slots == 0) return absl::InvalidArgumentError("the ring needs a slot");
  SecretBytes key(kAesKeySize);
  RandomBytes(key.data(), key.size());
  std::vector<std::unique_ptr<AesGcm>> gcms;  // one per piece size
  for (size_t p : options.pieces) {
    auto g = AesGcm::Create(key);
    if (!g.ok()) return g.status();
    absl::Status st = (*g)->SetPieceSizes(p, p);
    if (!st.ok()) return st;
    gcms.push_back(std::move(*g));
  }
  std::vector<uint8_t> large(options.large_bytes);
  for (size_t i = 0; i < large.size(); i += 4096) large[i] = static_cast<uint8_t>(i >> 12);
  const std::string aad = RandomString(kAadBytes);
  const auto* a = reinterpret_cast<const uint8_t*>(aad.data());

  std::vector<PieceTable> tables;
  for (size_t m : options.message_sizes) {
    if (m == 0 || m % 32 != 0 || m > options.large_bytes / 4 || m > (size_t{1} << 30)) {
      return absl::InvalidArgumentError(
          "message size " + std::to_string(m) +
          " must be a non-zero multiple of 32 of at most a quarter of the large buffer");
    }
    auto ring = BounceBuffer::Create(
        options.bounce_dir + "/gputravel-bench-piece-" + HexEncode(RandomString(8)),
        options.slots, static_cast<uint32_t>(m));
    if (!ring.ok()) return ring.status();
    (*ring)->Unlink();
    BounceBuffer* r = ring->get();
    const uint64_t per_large = options.large_bytes / m;
    // Ciphertext and tags for the decrypting loop: one message per slot.
    std::vector<std::array<uint8_t, kGcmTagSize>> tags(options.slots);
    uint8_t iv[kGcmIvSize] = {0};
    for (uint32_t s = 0; s < options.slots; ++s) {
      iv[0] = static_cast<uint8_t>(s);
      absl::Status st = gcms[0]->EncryptToShared(iv, a, kAadBytes, large.data() + s * m, m,
                                                 r->slot(s), tags[s].data());
      if (!st.ok()) return st;
    }
    PieceTable t;
    t.message_bytes = m;
    t.figures.resize(options.pieces.size());
    std::vector<std::vector<double>> enc_ratio(options.pieces.size()),
        dec_ratio(options.pieces.size());
    for (int round = 0; round < options.rounds; ++round) {
      auto ref = MeasureGcmReference(m, options.seconds);
      if (!ref.ok()) return ref.status();
      t.reference_mbps.push_back(ref->mbps);
      for (size_t j = 0; j < options.pieces.size(); ++j) {
        const size_t i = round % 2 ? options.pieces.size() - 1 - j : j;
        AesGcm* g = gcms[i].get();
        uint8_t tag[kGcmTagSize];
        uint8_t eiv[kGcmIvSize] = {1};
        auto enc = Loop(m, options.seconds, [&](uint64_t k) {
          std::memcpy(eiv + 4, &k, sizeof(k));
          return g->EncryptToShared(eiv, a, kAadBytes, large.data() + (k % per_large) * m, m,
                                    r->slot(static_cast<uint32_t>(k % options.slots)), tag);
        });
        if (!enc.ok()) return enc.status();
        // Leave the slots' ciphertext as the decrypting loop expects it.
        for (uint32_t s = 0; s < options.slots; ++s) {
          iv[0] = static_cast<uint8_t>(s);
          absl::Status st = g->EncryptToShared(iv, a, kAadBytes, large.data() + s * m, m,
                                               r->slot(s), tags[s].data());
          if (!st.ok()) return st;
        }
        auto dec = Loop(m, options.seconds, [&](uint64_t k) {
          const uint32_t s = static_cast<uint32_t>(k % options.slots);
          uint8_t div[kGcmIvSize] = {static_cast<uint8_t>(s)};
          return g->DecryptFromShared(div, a, kAadBytes, r->slot(s), m, tags[s].data(),
                                      large.data() + (k % per_large) * m);
        });
        if (!dec.ok()) return dec.status();
        PieceFigure& f = t.figures[i];
        f.piece = options.pieces[i];
        f.encrypt_mbps.push_back(*enc);
        f.decrypt_mbps.push_back(*dec);
        enc_ratio[i].push_back(ref->mbps > 0 ? *enc / ref->mbps : 0);
        dec_ratio[i].push_back(ref->mbps > 0 ? *dec / ref->mbps : 0);
      }
    }
    t.reference_median = Median(t.reference_mbps);
    for (size_t i = 0; i < t.figures.size(); ++i) {
      PieceFigure& f = t.figures[i];
      f.encrypt_median = Median(f.encrypt_mbps);
      f.decrypt_median = Median(f.decrypt_mbps);
      f.encrypt_ratio = Median(enc_ratio[i]);
      f.decrypt_ratio = Median(dec_ratio[i]);
    }
    tables.push_back(std::move(t));
  }
  return tables;
}

}  // namespace bench
}  // namespace gputravel
