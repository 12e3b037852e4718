#include "keyxfer/hkdf.h"

#include <string>

#include "gtest/gtest.h"
#include "util/hex.h"

namespace gputravel {
namespace {

std::string Unhex(const char* hex) {
  auto b = HexDecode(hex);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *b : "";
}

SecretBytes Secret(const std::string& s) {
  return SecretBytes(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

std::string Hex(const SecretBytes& s) {
  return HexEncode(absl::Span<const uint8_t>(s.data(), s.size()));
}

struct HkdfVector {
  int tc_id;
  const char* ikm;
  const char* salt;
  const char* info;
  size_t size;
  const char* okm;
};

// Project Wycheproof, testvectors/hkdf_sha384_test.json (C2SP/wycheproof,
// "HKDF-SHA-384"), by tcId: empty salt and info (1); a salt and no info (7);
// a salt, info and output longer than one SHA-384 output (two HMAC rounds,
// 12); a salt longer than the hash (20); 48 zero bytes of salt, which is what
// an empty salt stands for (22, same output as 21 with no salt).
const HkdfVector kWycheproof[] = {
    {1, "60ab7f45b0ad534683b3a6c020d4f775", "", "", 20,
     "3f8b0e4a7b2bff01a26a18f1e07c0218897a324e"},
    {7, "467403c2ec02a235bf730ff37e8d8ff3", "41f0f173d307d40436c25856cf559f96", "", 20,
     "55169d60bedd7ab2399d830b1da06f69f94e4b0c"},
    {12, "8677dc79233ef3480777c4c601ef4f0b", "ad88db718244e2cb60e35f874d7ad81f",
     "a38f634d947819a9bfa792174b42baa20c9fce15", 64,
     "758546362a070c0f13cbfbf1756e8f29b7819fb903c7ed4f97a56be3c8f81e8c"
     "37aef5c0f8e5d2b17eb1aa02ec04c33f546cb2f3d193e930a9f89ec9ce3a82b5"},
    {20, "34bae5a158c1678aa76a744417a70d7a",
     "1532075f363e061133780ac959bf653c7687d181b9431215d6f62dd2f1ec3019"
     "d61c50fa82c70ae25e624c849a276b0c57d7c02a4d753fe84a1a6621e9a5ef01",
     "87ec30aa53acfc3d09ccc1d57d654fdbce403cd4", 42,
     "9413c6e1b27f829fb82252b5ac5e14a54503e5f433fc8182a6b556bd7b8e04ac34b0d6006950d5917132"},
    {22, "5943c65bc33bf05a205b04be8ae0ab2e",
     "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
     "be082f301a03f87787a80fbea88941214d50c42b", 32,
     "6f93965b7399bdcaef06c151056ba14b7392a1521af1145e0c1d05e34b6f19f3"},
};

// Extract then Expand (RFC 5869 section 2) gives Wycheproof's output keying
// material.
TEST(HkdfTest, MatchesWycheproofSha384Vectors) {
  for (const HkdfVector& v : kWycheproof) {
    SCOPED_TRACE("tcId " + std::to_string(v.tc_id));
    auto prk = HkdfSha384Extract(Unhex(v.salt), Secret(Unhex(v.ikm)));
    ASSERT_TRUE(prk.ok()) << prk.status();
    EXPECT_EQ(prk->size(), 48u);
    auto okm = HkdfSha384Expand(*prk, Unhex(v.info), v.size);
    ASSERT_TRUE(okm.ok()) << okm.status();
    EXPECT_EQ(Hex(*okm), v.okm);
  }
}

// Expand's output is at most 255 blocks of the hash (RFC 5869 section 2.3):
// one byte more is refused, not wrapped around.
TEST(HkdfTest, ExpandRefusesMoreThan255Blocks) {
  auto prk = HkdfSha384Extract("salt", Secret("input keying material"));
  ASSERT_TRUE(prk.ok()) << prk.status();
  EXPECT_TRUE(HkdfSha384Expand(*prk, "info", 255 * 48).ok());
  EXPECT_FALSE(HkdfSha384Expand(*prk, "info", 255 * 48 + 1).ok());
}

// FIPS 180-2 appendix examples ("abc").
TEST(HkdfTest, DigestsMatchKnownAnswers) {
  EXPECT_EQ(HexEncode(Sha384("abc")),
            "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed"
            "8086072ba1e7cc2358baeca134c825a7");
  EXPECT_EQ(HexEncode(Sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace gputravel
