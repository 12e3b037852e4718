#include "auth/revocation_list.h"

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <ctime>

#include "auth/pki.h"
#include "auth/test_server.h"
#include "gtest/gtest.h"
#include "keyxfer/ec_key.h"
#include "keyxfer/x509.h"
#include "util/files.h"

namespace gputravel {
namespace {

const Identity kHolder{"holder", "a"};

// A CRL of the test CA with the given dates (seconds from now) and number,
// revoking `revoke` if given, signed by `signer_key_path` (the CA's key
// unless another is given).
std::string MakeCrl(const std::string& pki, long this_update, long next_update, long number,
                    X509* revoke = nullptr, const std::string& signer_key_path = "") {
  X509Ptr ca = ParseCertificate(*ReadFile(CaCertPath(pki)));
  absl::StatusOr<EcKey> key =
      EcKey::FromPrivatePem(*ReadFile(signer_key_path.empty() ? CaKeyPath(pki) : signer_key_path));
  EXPECT_TRUE(key.ok());
  CrlPtr crl(X509_CRL_new());
  X509_CRL_set_version(crl.get(), 1);
  X509_CRL_set_issuer_name(crl.get(), X509_get_subject_name(ca.get()));
  ASN1_TIME* t = ASN1_TIME_new();
  X509_gmtime_adj(t, this_update);
  X509_CRL_set1_lastUpdate(crl.get(), t);
  if (next_update != 0) {
    X509_gmtime_adj(t, next_update);
    X509_CRL_set1_nextUpdate(crl.get(), t);
  }
  if (revoke != nullptr) {
    X509_REVOKED* r = X509_REVOKED_new();
    X509_REVOKED_set_serialNumber(r, const_cast<ASN1_INTEGER*>(X509_get0_serialNumber(revoke)));
    X509_REVOKED_set_revocationDate(r, t);
    X509_CRL_add0_revoked(crl.get(), r);
  }
  ASN1_TIME_free(t);
  ASN1_INTEGER* n = ASN1_INTEGER_new();
  ASN1_INTEGER_set(n, number);
  X509_CRL_add1_ext_i2d(crl.get(), NID_crl_number, n, 0, 0);
  ASN1_INTEGER_free(n);
  X509_CRL_sign(crl.get(), key->pkey(), EVP_sha384());
  return CrlToPem(crl.get());
}

class RevocationListTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(MakeTestPki(Pki(), {kHolder}).ok()); }
  std::string Pki() const { return tmp_.path() + "/pki"; }
  std::string Ca() const { return *ReadFile(CaCertPath(Pki())); }
  X509Ptr Holder() const { return ParseCertificate(*ReadFile(IdentityCertPath(Pki(), kHolder))); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = tmp_.path() + "/" + name;
    EXPECT_TRUE(WriteFile(path + ".tmp", text, 0644).ok());
    EXPECT_EQ(::rename((path + ".tmp").c_str(), path.c_str()), 0);
    return path;
  }
  TempDir tmp_;
};

// Past its nextUpdate, a CRL could hide a later revocation: every peer is
// refused until a fresh one is published, which is then read without a
// restart.
TEST_F(RevocationListTest, ExpiredCrlRefusesEveryPeerUntilAFreshOneArrives) {
  const std::string path = Write("crl.pem", MakeCrl(Pki(), -7200, -60, 5));
  absl::StatusOr<std::shared_ptr<RevocationList>> list = RevocationList::Open(path, Ca());
  ASSERT_TRUE(list.ok()) << list.status();
  absl::Status s = (*list)->Check(Holder().get());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("CRL " + path + " expired at"), std::string::npos) << s;
  EXPECT_NE(s.message().find("gputravel pki crl"), std::string::npos) << s;
  Write("crl.pem", MakeCrl(Pki(), -60, 3600, 6));
  EXPECT_TRUE((*list)->Check(Holder().get()).ok());
  EXPECT_EQ((*list)->number(), 6);
}

// Only the campaign CA's CRL, dated now or before, with a nextUpdate, is
// used: at start an error; later, the CRL in force stays.
TEST_F(RevocationListTest, OnlyTheCasCurrentCrlsAreUsed) {
  TempDir other;
  ASSERT_TRUE(InitCampaignCa(other.path() + "/pki", "other-campaign", 2).ok());
  const std::string forged =
      MakeCrl(Pki(), -60, 3600, 9, Holder().get(), CaKeyPath(other.path() + "/pki"));
  struct Case {
    std::string text, error;
  } cases[] = {
      {forged, "does not verify under the campaign CA"},
      {MakeCrl(Pki(), 7 * 86400, 8 * 86400, 9, Holder().get()), "is in the future"},
      {MakeCrl(Pki(), -60, 0, 9, Holder().get()), "has no nextUpdate"},
      {"junk", "not a PEM X.509 CRL"},
      {*ReadFile(CrlPath(other.path() + "/pki")), "another CA"},
  };
  for (const Case& c : cases) {
    const std::string path = Write("bad.pem", c.text);
    absl::StatusOr<std::shared_ptr<RevocationList>> list = RevocationList::Open(path, Ca());
    ASSERT_FALSE(list.ok()) << c.error;
    EXPECT_NE(list.status().message().find(c.error), std::string::npos) << list.status();
  }
  // In force: number 3, nothing revoked. Each bad file (all revoking the
  // holder) leaves it in force: the holder passes.
  const std::string path = Write("crl.pem", MakeCrl(Pki(), -60, 3600, 3));
  absl::StatusOr<std::shared_ptr<RevocationList>> list = RevocationList::Open(path, Ca());
  ASSERT_TRUE(list.ok()) << list.status();
  for (const Case& c : cases) {
    Write("crl.pem", c.text);
    EXPECT_TRUE((*list)->Check(Holder().get()).ok()) << c.error;
    EXPECT_EQ((*list)->number(), 3);
  }
  // An older number, even if the CA's, is a rollback.
  Write("crl.pem", MakeCrl(Pki(), -60, 3600, 2, Holder().get()));
  EXPECT_TRUE((*list)->Check(Holder().get()).ok());
  // A newer one takes effect.
  Write("crl.pem", MakeCrl(Pki(), -60, 3600, 4, Holder().get()));
  absl::Status s = (*list)->Check(Holder().get());
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find("of holder 'a' is revoked (CRL " + path), std::string::npos) << s;
}

}  // namespace
}  // namespace gputravel
