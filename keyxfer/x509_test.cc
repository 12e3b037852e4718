#include "keyxfer/x509.h"

#include "gtest/gtest.h"
#include "keyxfer/ec_key.h"

namespace gputravel {
namespace {

class X509Test : public ::testing::Test {
 protected:
  void SetUp() override {
    ca_ = std::make_unique<EcKey>(*EcKey::Generate(Curve::kP384));
    ca_der_ = *IssueCertificate(*ca_, "device-ca", *ca_, "", true, 1);
  }
  std::unique_ptr<EcKey> ca_;
  std::string ca_der_;
};

TEST_F(X509Test, LeafOfThePinnedCaVerifies) {
  auto id = *EcKey::Generate(Curve::kP384);
  auto leaf = *IssueCertificate(id, "EMU-1", *ca_, ca_der_, false, 1);
  auto v = VerifyCertificate(leaf, ca_der_);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->common_name, "EMU-1");
  EXPECT_EQ(v->public_key.PublicPoint(), id.PublicPoint());
}

// A certificate the CA issued for signing certificates (CA:TRUE,
// keyCertSign only) is not a device identity, though it chains.
TEST_F(X509Test, CaCertificateIsNotAnIdentity) {
  auto sub = *EcKey::Generate(Curve::kP384);
  auto sub_ca = *IssueCertificate(sub, "EMU-1", *ca_, ca_der_, true, 1);
  auto v = VerifyCertificate(sub_ca, ca_der_);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kUnauthenticated) << v.status();
  EXPECT_NE(v.status().message().find("CA certificate"), std::string::npos) << v.status();
}

TEST_F(X509Test, LeafOfAnotherCaRefused) {
  auto other = *EcKey::Generate(Curve::kP384);
  auto other_der = *IssueCertificate(other, "other-ca", other, "", true, 1);
  auto id = *EcKey::Generate(Curve::kP384);
  auto leaf = *IssueCertificate(id, "EMU-1", other, other_der, false, 1);
  EXPECT_EQ(VerifyCertificate(leaf, ca_der_).status().code(),
            absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace gputravel
