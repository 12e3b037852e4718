#include "keyxfer/ec_key.h"

#include <string>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

class EcKeyTest : public ::testing::TestWithParam<Curve> {};

TEST_P(EcKeyTest, PublicPointRoundTripsAndAgrees) {
  auto a = EcKey::Generate(GetParam());
  auto b = EcKey::Generate(GetParam());
  ASSERT_TRUE(a.ok() && b.ok());
  auto back = EcKey::FromPublicPoint(GetParam(), a->PublicPoint());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->PublicPoint(), a->PublicPoint());
  auto ab = a->DeriveSharedSecret(b->PublicPoint());
  auto ba = b->DeriveSharedSecret(a->PublicPoint());
  ASSERT_TRUE(ab.ok() && ba.ok());
  EXPECT_EQ(ab->size(), ba->size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(ab->data()), ab->size()),
            std::string(reinterpret_cast<const char*>(ba->data()), ba->size()));
}

// Invalid-curve points are refused before any ECDH (the quick check is the
// complete validation on these cofactor-1 curves).
TEST_P(EcKeyTest, PointOffTheCurveRefused) {
  auto a = EcKey::Generate(GetParam());
  ASSERT_TRUE(a.ok());
  std::string p = a->PublicPoint();
  p.back() ^= 0x01;  // y no longer matches x
  auto bad = EcKey::FromPublicPoint(GetParam(), p);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(a->DeriveSharedSecret(p).ok());
  // x outside the field (all 0xFF) is refused too.
  std::string big(p.size(), '\xff');
  big[0] = 0x04;
  EXPECT_FALSE(EcKey::FromPublicPoint(GetParam(), big).ok());
}

TEST_P(EcKeyTest, WrongEncodingsRefused) {
  auto a = EcKey::Generate(GetParam());
  ASSERT_TRUE(a.ok());
  std::string p = a->PublicPoint();
  EXPECT_FALSE(EcKey::FromPublicPoint(GetParam(), p.substr(0, p.size() - 1)).ok());
  EXPECT_FALSE(EcKey::FromPublicPoint(GetParam(), std::string(1, '\0')).ok());  // infinity
  std::string compressed = p.substr(0, 1 + (p.size() - 1) / 2);
  compressed[0] = 0x02;
  EXPECT_FALSE(EcKey::FromPublicPoint(GetParam(), compressed).ok());
  // A point of the other curve.
  Curve other = GetParam() == Curve::kP256 ? Curve::kP384 : Curve::kP256;
  auto b = EcKey::Generate(other);
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(EcKey::FromPublicPoint(GetParam(), b->PublicPoint()).ok());
}

INSTANTIATE_TEST_SUITE_P(Curves, EcKeyTest, ::testing::Values(Curve::kP256, Curve::kP384));

}  // namespace
}  // namespace gputravel
