#include "metrics/counted_verifier.h"

#include <string>

#include "gtest/gtest.h"
#include "keyxfer/dev_attester.h"
#include "keyxfer/x509.h"

namespace gputravel {
namespace {

// Real development evidence, verified by a real DevVerifier: the counter
// moves only when the verifier refuses.
TEST(CountedVerifierTest, CountsRefusedEvidenceAndPassesAnswersThrough) {
  auto root_key = *EcKey::Generate(Curve::kP256);
  const std::string root_der = *IssueCertificate(root_key, "dev root", root_key, "", true, 1);
  auto key = *EcKey::Generate(Curve::kP256);
  auto cert = *IssueCertificate(key, "holder-a", root_key, root_der, false, 1);
  auto attester = *DevAttester::Create("holder-a", std::move(key), cert, std::string(48, 'H'));
  DevPolicy policy;
  policy.allowed_mrtd = {std::string(48, 'H')};
  DevVerifier inner(root_der, policy);
  MetricsRegistry registry;
  CountedVerifier verifier(&inner, &registry);

  ReportData rd{};
  rd[0] = 7;
  Evidence evidence = *attester->Attest(rd);
  auto good = verifier.Verify(evidence, rd);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->mrtd, std::vector<uint8_t>(48, 'H'));
  EXPECT_NE(registry.Text().find(std::string(kAttestationFailuresMetric) + " 0"),
            std::string::npos)
      << registry.Text();

  ReportData other = rd;
  other[0] = 8;  // evidence bound to other report data (a replay)
  auto replay = verifier.Verify(evidence, other);
  ASSERT_FALSE(replay.ok());
  DevPolicy strict;
  strict.allowed_mrtd = {std::string(48, 'X')};
  DevVerifier strict_inner(root_der, strict);
  CountedVerifier strict_verifier(&strict_inner, &registry);  // the same counter
  EXPECT_FALSE(strict_verifier.Verify(evidence, rd).ok());
  EXPECT_NE(registry.Text().find(std::string(kAttestationFailuresMetric) + " 2"),
            std::string::npos)
      << registry.Text();
}

}  // namespace
}  // namespace gputravel
