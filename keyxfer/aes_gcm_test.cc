#include "keyxfer/aes_gcm.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "keyxfer/random.h"
#include "util/hex.h"

namespace gputravel {
namespace {

SecretBytes RandomKey() {
  SecretBytes k(32);
  RandomBytes(k.data(), k.size());
  return k;
}

TEST(AesGcmTest, RoundTrip) {
  auto g = AesGcm::Create(RandomKey());
  ASSERT_TRUE(g.ok());
  uint8_t iv[12] = {1};
  auto sealed = (*g)->Seal(iv, "aad", "hello world");
  ASSERT_TRUE(sealed.ok());
  EXPECT_NE(sealed->substr(0, 11), "hello world");
  auto opened = (*g)->Open(iv, "aad", *sealed);
  ASSERT_TRUE(opened.ok());
  EXPECT_EQ(*opened, "hello world");
}

TEST(AesGcmTest, WrongKeyRefused) {
  auto a = AesGcm::Create(RandomKey());
  auto b = AesGcm::Create(RandomKey());
  uint8_t iv[12] = {0};
  auto sealed = (*a)->Seal(iv, "", "secret");
  auto opened = (*b)->Open(iv, "", *sealed);
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kDataLoss);
}

TEST(AesGcmTest, WrongAssociatedDataRefused) {
  auto g = AesGcm::Create(RandomKey());
  uint8_t iv[12] = {0};
  auto sealed = (*g)->Seal(iv, "trip=1", "secret");
  EXPECT_EQ((*g)->Open(iv, "trip=2", *sealed).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(AesGcmTest, TamperedCiphertextRefusedAndOutputZeroized) {
  auto g = AesGcm::Create(RandomKey());
  uint8_t iv[12] = {0};
  std::string pt(64, 'x');
  uint8_t ct[64], tag[16], out[64];
  ASSERT_TRUE((*g)->Encrypt(iv, nullptr, 0, reinterpret_cast<const uint8_t*>(pt.data()),
                            64, ct, tag).ok());
  ct[5] ^= 1;
  EXPECT_FALSE((*g)->Decrypt(iv, nullptr, 0, ct, 64, tag, out).ok());
  for (auto b : out) EXPECT_EQ(b, 0);
}

// Through private pieces, the result is the plain Encrypt/Decrypt's, at
// every length around the piece sizes, with the default pieces and others.
TEST(AesGcmTest, SharedMemoryVariantsMatchThePlainOnes) {
  const size_t P = AesGcm::kEncryptPiece, Q = AesGcm::kDecryptPiece;
  const std::pair<size_t, size_t> kPieces[] = {{P, Q}, {4096, 4096}, {64, 12288}};
  for (const auto& [ep, dp] : kPieces) {
    auto g = AesGcm::Create(RandomKey());
    ASSERT_TRUE(g.ok());
    if (ep != P || dp != Q) ASSERT_TRUE((*g)->SetPieceSizes(ep, dp).ok());
    for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{4096}, ep - 1, ep, ep + 1,
                     3 * ep + 17, dp - 1, dp, dp + 1, 3 * dp + 17, size_t{2} << 20}) {
      for (size_t shift : {size_t{0}, size_t{1}, size_t{32}}) {  // aligned or not
        SCOPED_TRACE("pieces " + std::to_string(ep) + "/" + std::to_string(dp) + ", " +
                     std::to_string(n) + " bytes at +" + std::to_string(shift));
        std::string pt = RandomString(n);
        const auto* in = reinterpret_cast<const uint8_t*>(pt.data());
        std::vector<uint8_t> a(n + 1), back(n + 1);
        std::unique_ptr<uint8_t, void (*)(void*)> shared(
            static_cast<uint8_t*>(std::aligned_alloc(64, (n + 128) / 64 * 64)), &std::free);
        uint8_t* b = shared.get() + shift;
        uint8_t iv[12] = {7}, ta[16], tb[16];
        ASSERT_TRUE((*g)->Encrypt(iv, in, 5, in, n, a.data(), ta).ok());
        ASSERT_TRUE((*g)->EncryptToShared(iv, in, 5, in, n, b, tb).ok());
        EXPECT_EQ(std::memcmp(a.data(), b, n), 0);
        EXPECT_EQ(std::memcmp(ta, tb, 16), 0);
        ASSERT_TRUE((*g)->DecryptFromShared(iv, in, 5, b, n, tb, back.data()).ok());
        EXPECT_EQ(std::memcmp(back.data(), pt.data(), n), 0);
        if (n == 0) continue;
        b[n / 2] ^= 0x10;
        EXPECT_EQ((*g)->DecryptFromShared(iv, in, 5, b, n, tb, back.data()).code(),
                  absl::StatusCode::kDataLoss);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 0) << "unauthenticated plaintext at " << i;
      }
    }
  }
}

// The encrypting piece is a whole number of the stitched AES-NI GCM loop's
// 96-byte strides, and other sizes are refused unless they are whole
// 64-byte lines (the piece is allocated 64-byte aligned).
TEST(AesGcmTest, PieceSizes) {
  static_assert(AesGcm::kEncryptPiece % 96 == 0);
  auto g = AesGcm::Create(RandomKey());
  ASSERT_TRUE(g.ok());
  for (auto [ep, dp] : {std::pair<size_t, size_t>{0, 4096}, {4096, 0}, {4000, 4096},
                        {4096, 100}, {(size_t{1} << 20) + 64, 4096}}) {
    EXPECT_EQ((*g)->SetPieceSizes(ep, dp).code(), absl::StatusCode::kInvalidArgument)
        << ep << "/" << dp;
  }
  EXPECT_TRUE((*g)->SetPieceSizes(64, size_t{1} << 20).ok());
}

// Another party writing the shared buffer while the call runs (the host and
// a bounce slot) can make the result refused, never make the tag vouch for
// bytes the call did not produce (encrypt) or make plaintext of bytes the
// tag did not cover (decrypt). The writer here flips a byte the moment the
// ciphertext lands in it, which is when OpenSSL would read it back for the
// tag were it encrypting straight into shared memory.
TEST(AesGcmTest, WriterRacingTheSharedBufferCannotForgeAnything) {
  auto g = AesGcm::Create(RandomKey());
  ASSERT_TRUE(g.ok());
  const size_t n = 1 << 20, k = 100;
  const std::string pt = RandomString(n);
  const auto* in = reinterpret_cast<const uint8_t*>(pt.data());
  std::vector<uint8_t> shared(n), out(n), ct(n);
  std::atomic<bool> go{false}, quit{false};
  std::atomic<int> flips{0};
  std::thread host([&] {
    auto* p = reinterpret_cast<volatile uint8_t*>(shared.data()) + k;
    while (!quit.load()) {
      if (!go.load()) continue;
      const uint8_t before = *p;
      while (go.load() && *p == before) {
      }
      if (!go.load()) continue;
      *p ^= 0x01;
      flips.fetch_add(1);
      while (go.load()) {
      }
    }
  });
  int refused = 0;
  for (int i = 0; i < 200; ++i) {
    uint8_t iv[12] = {static_cast<uint8_t>(i), static_cast<uint8_t>(i >> 8)}, tag[16];
    std::fill(shared.begin(), shared.end(), 0);
    go = true;
    ASSERT_TRUE((*g)->EncryptToShared(iv, nullptr, 0, in, n, shared.data(), tag).ok());
    go = false;
    // Whatever the buffer holds now, the tag vouches only for our ciphertext.
    if ((*g)->Decrypt(iv, nullptr, 0, shared.data(), n, tag, out.data()).ok()) {
      ASSERT_EQ(std::memcmp(out.data(), pt.data(), n), 0) << "a tag over the host's bytes";
    } else {
      ++refused;
    }
    // Ciphertext made privately, then decrypted while the host writes.
    ASSERT_TRUE((*g)->Encrypt(iv, nullptr, 0, in, n, ct.data(), tag).ok());
    std::memcpy(shared.data(), ct.data(), n);
    shared[k] ^= 0x80;  // the host's writer reacts to any change
    shared[k] ^= 0x80;
    go = true;
    const bool ok = (*g)->DecryptFromShared(iv, nullptr, 0, shared.data(), n, tag, out.data()).ok();
    go = false;
    if (ok) {
      ASSERT_EQ(std::memcmp(out.data(), pt.data(), n), 0) << "plaintext the tag did not cover";
    }
  }
  quit = true;
  host.join();
  if (std::thread::hardware_concurrency() > 1) {
    EXPECT_GT(flips.load(), 0);
    EXPECT_GT(refused, 0) << "the host's writes never landed: the race was not exercised";
  }
}

TEST(AesGcmTest, RejectsShortKey) {
  EXPECT_FALSE(AesGcm::Create(SecretBytes(16)).ok());
}

TEST(AesGcmTest, MatchesKnownAnswer) {
  // NIST GCM test vector (gcmEncryptExtIV256, Count 0 with empty PT/AAD):
  // key = 0^32, IV = 0^12 -> tag 530f8afbc74536b9a963b4f1c4cb738b.
  auto g = AesGcm::Create(SecretBytes(32));
  uint8_t iv[12] = {0};
  auto sealed = (*g)->Seal(iv, "", "");
  ASSERT_TRUE(sealed.ok());
  const uint8_t want[16] = {0x53, 0x0f, 0x8a, 0xfb, 0xc7, 0x45, 0x36, 0xb9,
                            0xa9, 0x63, 0xb4, 0xf1, 0xc4, 0xcb, 0x73, 0x8b};
  EXPECT_EQ(*sealed, std::string(reinterpret_cast<const char*>(want), 16));
}

// The AES-256 vectors with a 96-bit IV and a non-empty plaintext from the
// GCM specification (D. McGrew and J. Viega, "The Galois/Counter Mode of
// Operation (GCM)", 2005, Appendix B, test cases 14, 15 and 16; 16 is the
// one with associated data; 17 and 18 use other IV lengths, which this
// class does not take).
struct GcmVector {
  const char* name;
  const char* key;
  const char* iv;
  const char* aad;
  const char* plaintext;
  const char* ciphertext;
  const char* tag;
};

constexpr char kSpecKey[] = "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308";
constexpr char kSpecIv[] = "cafebabefacedbaddecaf888";
constexpr char kSpecPlaintext60[] =
    "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
    "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39";
constexpr char kSpecCiphertext60[] =
    "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
    "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662";

const GcmVector kGcmSpecVectors[] = {
    {"test case 14", "0000000000000000000000000000000000000000000000000000000000000000",
     "000000000000000000000000", "", "00000000000000000000000000000000",
     "cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919"},
    {"test case 15", kSpecKey, kSpecIv, "",
     "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
     "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255",
     "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
     "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad",
     "b094dac5d93471bdec1a502270e3cc6c"},
    {"test case 16", kSpecKey, kSpecIv, "feedfacedeadbeeffeedfacedeadbeefabaddad2",
     kSpecPlaintext60, kSpecCiphertext60, "76fc6ece0f4e1768cddf8853bb2d551b"},
};

std::string Unhex(const char* hex) {
  auto b = HexDecode(hex);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *b : "";
}

const uint8_t* Bytes(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

// Encrypting gives the published ciphertext and tag, by every entry point;
// decrypting gives the plaintext back; a flipped bit in the tag, the
// associated data or the ciphertext is refused.
TEST(AesGcmTest, MatchesTheGcmSpecificationVectors) {
  for (const GcmVector& v : kGcmSpecVectors) {
    SCOPED_TRACE(v.name);
    const std::string key = Unhex(v.key), iv = Unhex(v.iv), aad = Unhex(v.aad),
                      pt = Unhex(v.plaintext), ct = Unhex(v.ciphertext), tag = Unhex(v.tag);
    ASSERT_EQ(key.size(), kAesKeySize);
    ASSERT_EQ(iv.size(), kGcmIvSize);
    auto g = AesGcm::Create(SecretBytes(Bytes(key), key.size()));
    ASSERT_TRUE(g.ok()) << g.status();
    const size_t n = pt.size();

    auto sealed = (*g)->Seal(Bytes(iv), aad, pt);
    ASSERT_TRUE(sealed.ok()) << sealed.status();
    EXPECT_EQ(HexEncode(*sealed), HexEncode(ct + tag));
    std::vector<uint8_t> out(n), shared(n);
    uint8_t t[kGcmTagSize];
    ASSERT_TRUE((*g)->Encrypt(Bytes(iv), Bytes(aad), aad.size(), Bytes(pt), n, out.data(), t).ok());
    EXPECT_EQ(HexEncode(absl::MakeConstSpan(out)), v.ciphertext);
    EXPECT_EQ(HexEncode(absl::MakeConstSpan(t, kGcmTagSize)), v.tag);
    ASSERT_TRUE(
        (*g)->EncryptToShared(Bytes(iv), Bytes(aad), aad.size(), Bytes(pt), n, shared.data(), t)
            .ok());
    EXPECT_EQ(HexEncode(absl::MakeConstSpan(shared)), v.ciphertext);
    EXPECT_EQ(HexEncode(absl::MakeConstSpan(t, kGcmTagSize)), v.tag);

    auto opened = (*g)->Open(Bytes(iv), aad, ct + tag);
    ASSERT_TRUE(opened.ok()) << opened.status();
    EXPECT_EQ(HexEncode(*opened), v.plaintext);
    ASSERT_TRUE((*g)->DecryptFromShared(Bytes(iv), Bytes(aad), aad.size(), Bytes(ct), n,
                                        Bytes(tag), out.data())
                    .ok());
    EXPECT_EQ(HexEncode(absl::MakeConstSpan(out)), v.plaintext);

    std::string bad_tag = tag;
    bad_tag[kGcmTagSize - 1] ^= 0x01;
    EXPECT_EQ((*g)->Open(Bytes(iv), aad, ct + bad_tag).status().code(),
              absl::StatusCode::kDataLoss);
    EXPECT_EQ((*g)->Decrypt(Bytes(iv), Bytes(aad), aad.size(), Bytes(ct), n, Bytes(bad_tag),
                            out.data())
                  .code(),
              absl::StatusCode::kDataLoss);
    for (uint8_t b : out) ASSERT_EQ(b, 0) << "unauthenticated plaintext";
    std::string bad_ct = ct;
    bad_ct[0] ^= 0x80;
    EXPECT_EQ((*g)->Open(Bytes(iv), aad, bad_ct + tag).status().code(),
              absl::StatusCode::kDataLoss);
    // Associated data: a flipped bit of it, or one byte more or less.
    std::string more_aad = aad + std::string(1, '\0');
    EXPECT_EQ((*g)->Open(Bytes(iv), more_aad, ct + tag).status().code(),
              absl::StatusCode::kDataLoss);
    if (!aad.empty()) {
      std::string bad_aad = aad;
      bad_aad[aad.size() / 2] ^= 0x01;
      EXPECT_EQ((*g)->Open(Bytes(iv), bad_aad, ct + tag).status().code(),
                absl::StatusCode::kDataLoss);
      EXPECT_EQ((*g)->Open(Bytes(iv), aad.substr(1), ct + tag).status().code(),
                absl::StatusCode::kDataLoss);
    }
  }
}

}  // namespace
}  // namespace gputravel
