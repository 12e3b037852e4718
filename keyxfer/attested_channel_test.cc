#include "keyxfer/attested_channel.h"

#include "gtest/gtest.h"
#include "keyxfer/dev_attester.h"
#include "keyxfer/x509.h"

namespace gputravel {
namespace {

// Development PKI for the tests: a root and one attestation key per domain.
class AttestedChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto root_key = *EcKey::Generate(Curve::kP256);
    root_der_ = *IssueCertificate(root_key, "dev root", root_key, "", true, 1);
    orch_ = MakeAttester(root_key, "orchestrator", std::string(48, 'O'));
    holder_ = MakeAttester(root_key, "holder-a", std::string(48, 'H'));
  }
  std::unique_ptr<DevAttester> MakeAttester(const EcKey& root_key,
                                            const std::string& domain,
                                            const std::string& mrtd) {
    auto k = *EcKey::Generate(Curve::kP256);
    auto cert = *IssueCertificate(k, domain, root_key, root_der_, false, 1);
    return *DevAttester::Create(domain, std::move(k), cert, mrtd);
  }
  DevVerifier VerifierFor(const std::string& mrtd) {
    DevPolicy p;
    p.allowed_mrtd = {mrtd};
    return DevVerifier(root_der_, p);
  }
  std::string root_der_;
  std::unique_ptr<DevAttester> orch_, holder_;
};

TEST_F(AttestedChannelTest, MutualAgreementYieldsSameKey) {
  auto init = *ChannelInitiator::Create();
  auto resp = *ChannelResponder::Respond(init.public_key(), init.nonce(), *holder_);
  auto hv = VerifierFor(std::string(48, 'H'));
  Evidence orch_ev;
  auto oc = init.Complete(resp.public_key(), resp.nonce(), resp.evidence(), hv,
                          *orch_, &orch_ev);
  ASSERT_TRUE(oc.ok()) << oc.status();
  auto ov = VerifierFor(std::string(48, 'O'));
  auto hc = resp.Confirm(orch_ev, ov);
  ASSERT_TRUE(hc.ok()) << hc.status();
  EXPECT_TRUE(oc->handoff_key.Equals(hc->handoff_key));
  // The report key (holder to orchestrator) is the same on both sides and
  // is not the hand-off key.
  EXPECT_TRUE(oc->report_key.Equals(hc->report_key));
  EXPECT_EQ(oc->report_key.size(), 32u);
  EXPECT_FALSE(oc->report_key.Equals(oc->handoff_key));
  EXPECT_EQ(oc->transcript_hash, hc->transcript_hash);
  // A channel is confirmed once.
  EXPECT_FALSE(resp.Confirm(orch_ev, ov).ok());
}

// proto/holder.proto promises uncompressed P-256 points (65 bytes, 0x04
// prefix) in OpenChannelRequest and OpenChannelResponse; a P-384 key (97
// bytes) is refused.
TEST_F(AttestedChannelTest, ChannelKeysAreUncompressedP256AsTheContractSays) {
  auto init = *ChannelInitiator::Create();
  ASSERT_EQ(init.public_key().size(), 65u);
  EXPECT_EQ(init.public_key()[0], '\x04');
  auto resp = *ChannelResponder::Respond(init.public_key(), init.nonce(), *holder_);
  ASSERT_EQ(resp.public_key().size(), 65u);
  EXPECT_EQ(resp.public_key()[0], '\x04');
  auto p384 = *EcKey::Generate(Curve::kP384);
  ASSERT_EQ(p384.PublicPoint().size(), 97u);
  EXPECT_FALSE(ChannelResponder::Respond(p384.PublicPoint(), init.nonce(), *holder_).ok());
}

TEST_F(AttestedChannelTest, ReplayedHolderEvidenceWithOldNonceRefused) {
  auto init1 = *ChannelInitiator::Create();
  auto resp1 = *ChannelResponder::Respond(init1.public_key(), init1.nonce(), *holder_);
  // An attacker replays the first response to a new initiator (new nonce).
  auto init2 = *ChannelInitiator::Create();
  auto hv = VerifierFor(std::string(48, 'H'));
  Evidence ev;
  auto st = init2.Complete(resp1.public_key(), resp1.nonce(), resp1.evidence(), hv,
                           *orch_, &ev);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(st.status().message().find("REPORTDATA"), std::string::npos);
}

TEST_F(AttestedChannelTest, EvidenceBoundToAnotherKeyRefused) {
  auto init = *ChannelInitiator::Create();
  auto resp = *ChannelResponder::Respond(init.public_key(), init.nonce(), *holder_);
  // A man in the middle substitutes his own public key but keeps the evidence.
  auto mitm = *EcKey::Generate(kChannelCurve);
  auto hv = VerifierFor(std::string(48, 'H'));
  Evidence ev;
  EXPECT_FALSE(init.Complete(mitm.PublicPoint(), resp.nonce(), resp.evidence(), hv,
                             *orch_, &ev).ok());
}

TEST_F(AttestedChannelTest, HolderRefusesOrchestratorWithWrongMeasurement) {
  auto init = *ChannelInitiator::Create();
  auto resp = *ChannelResponder::Respond(init.public_key(), init.nonce(), *holder_);
  auto hv = VerifierFor(std::string(48, 'H'));
  Evidence orch_ev;
  ASSERT_TRUE(init.Complete(resp.public_key(), resp.nonce(), resp.evidence(), hv,
                            *orch_, &orch_ev).ok());
  auto wrong = VerifierFor(std::string(48, 'X'));
  auto st = resp.Confirm(orch_ev, wrong);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(st.status().message().find("MRTD"), std::string::npos);
}

TEST_F(AttestedChannelTest, ReflectedEvidenceRefused) {
  // The holder's own evidence presented back to it as the orchestrator's.
  auto init = *ChannelInitiator::Create();
  auto resp = *ChannelResponder::Respond(init.public_key(), init.nonce(), *holder_);
  DevVerifier any(root_der_, DevPolicy{});
  EXPECT_FALSE(resp.Confirm(resp.evidence(), any).ok());
}

TEST_F(AttestedChannelTest, UntrustedRootRefused) {
  auto other_root = *EcKey::Generate(Curve::kP256);
  auto other_der = *IssueCertificate(other_root, "evil", other_root, "", true, 1);
  DevVerifier v(other_der, DevPolicy{});
  auto init = *ChannelInitiator::Create();
  auto resp = *ChannelResponder::Respond(init.public_key(), init.nonce(), *holder_);
  Evidence ev;
  EXPECT_FALSE(init.Complete(resp.public_key(), resp.nonce(), resp.evidence(), v,
                             *orch_, &ev).ok());
}

TEST_F(AttestedChannelTest, OtherEvidenceFormatRefusedByDevVerifier) {
  DevVerifier v(root_der_, DevPolicy{});
  Evidence e;
  e.set_format("tdx-quote-v4");
  ReportData rd{};
  EXPECT_EQ(v.Verify(e, rd).status().code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace gputravel
