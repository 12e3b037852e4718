#include "auth/identity.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "auth/pki.h"
#include "auth/test_server.h"
#include "gtest/gtest.h"
#include "keyxfer/ec_key.h"
#include "keyxfer/x509.h"
#include "util/files.h"

namespace gputravel {
namespace {

// A self-signed certificate with the given subject and SAN (test crafting of
// certificates the PKI would never issue).
std::string CraftCert(const std::string& cn, const std::string& ou, const std::string& san) {
  EVP_PKEY* key = EVP_EC_gen("prime256v1");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 7);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  if (!ou.empty()) {
    X509_NAME_add_entry_by_txt(name, "OU", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(ou.c_str()), -1, -1, 0);
  }
  if (!cn.empty()) {
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  }
  X509_set_issuer_name(cert, name);
  if (!san.empty()) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, san.c_str());
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }
  X509_sign(cert, key, EVP_sha256());
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* p = nullptr;
  long n = BIO_get_mem_data(bio, &p);
  std::string out(p, static_cast<size_t>(n));
  BIO_free(bio);
  X509_free(cert);
  EVP_PKEY_free(key);
  return out;
}

TEST(IdentityTest, RolesRoundTrip) {
  for (const std::string& r : AllRoleNames()) {
    absl::StatusOr<Role> role = ParseRole(r);
    ASSERT_TRUE(role.ok()) << r;
    EXPECT_EQ(RoleName(*role), r);
  }
  EXPECT_EQ(AllRoleNames(), (std::vector<std::string>{"orchestrator", "holder", "operator",
                                                      "scheduler", "mux", "trainer"}));
  absl::StatusOr<Role> bad = ParseRole("admin");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'admin'"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("orchestrator, holder"), std::string::npos);
}

TEST(IdentityTest, NameRules) {
  const std::string longest(63, 'z');
  for (const std::string& good : {std::string("a"), std::string("0"), std::string("hospital-a"),
                                  std::string("h.1_x-2"), longest}) {
    EXPECT_TRUE(ValidateName(good).ok()) << good;
  }
  const std::string too_long(64, 'z');
  for (const std::string& bad :
       {std::string(""), std::string("Hospital"), std::string("-a"), std::string(".a"),
        std::string("_a"), std::string("a b"), std::string("a/b"), std::string("a..b"),
        std::string("a:b"), too_long}) {
    absl::Status s = ValidateName(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("'" + bad + "'"), std::string::npos) << s;
  }
  EXPECT_FALSE(ValidateIdentity({"admin", "a"}).ok());
  EXPECT_FALSE(ValidateIdentity({"holder", "A"}).ok());
  EXPECT_TRUE(ValidateIdentity({"mux", "host1"}).ok());
}

TEST(IdentityTest, ServerNameAndUri) {
  Identity id{"holder", "hospital-a"};
  EXPECT_EQ(ServerNameFor(id), "hospital-a.holder.gputravel");
  EXPECT_EQ(IdentityUri(id), "gputravel://holder/hospital-a");
  EXPECT_EQ(DescribeIdentity(id), "holder 'hospital-a'");
  EXPECT_TRUE(id == (Identity{"holder", "hospital-a"}));
  EXPECT_TRUE(id != (Identity{"mux", "hospital-a"}));
}

TEST(IdentityTest, FromIssuedCertificatePemAndDer) {
  TempDir dir;
  ASSERT_TRUE(InitCampaignCa(dir.path(), "trial", 30).ok());
  Identity id{"holder", "hospital-a"};
  absl::StatusOr<IssuedFiles> files = IssueIdentity(dir.path(), id, 10);
  ASSERT_TRUE(files.ok()) << files.status();
  std::string pem = *ReadFile(files->cert);
  absl::StatusOr<Identity> from_pem = IdentityFromCertificate(pem);
  ASSERT_TRUE(from_pem.ok()) << from_pem.status();
  EXPECT_EQ(*from_pem, id);
  absl::StatusOr<std::string> der = CertificatePemToDer(pem);
  ASSERT_TRUE(der.ok());
  absl::StatusOr<Identity> from_der = IdentityFromCertificate(*der);
  ASSERT_TRUE(from_der.ok()) << from_der.status();
  EXPECT_EQ(*from_der, id);
  // The CA itself is not an identity.
  EXPECT_FALSE(IdentityFromCertificate(*ReadFile(CaCertPath(dir.path()))).ok());
}

TEST(IdentityTest, RejectsNonCertificates) {
  EXPECT_FALSE(IdentityFromCertificate("").ok());
  EXPECT_FALSE(IdentityFromCertificate("-----BEGIN CERTIFICATE-----\nxx\n").ok());
  EXPECT_FALSE(IdentityFromCertificate("\x30\x03\x02\x01\x01").ok());
}

TEST(IdentityTest, RejectsCertificateWithoutIdentity) {
  // A keyxfer certificate: CN only.
  auto key = EcKey::Generate(Curve::kP256);
  ASSERT_TRUE(key.ok());
  auto der = IssueCertificate(*key, "a", *key, "", false, 1);
  ASSERT_TRUE(der.ok());
  absl::StatusOr<Identity> id = IdentityFromCertificate(*der);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("no OU"), std::string::npos) << id.status();
}

TEST(IdentityTest, SanUriMustAgreeWithSubject) {
  absl::StatusOr<Identity> id =
      IdentityFromCertificate(CraftCert("a", "holder", "URI:gputravel://holder/b"));
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("disagrees"), std::string::npos) << id.status();
  id = IdentityFromCertificate(CraftCert("a", "holder", "URI:gputravel://mux/a"));
  EXPECT_FALSE(id.ok());
  id = IdentityFromCertificate(CraftCert("a", "holder", "URI:https://holder/a"));
  EXPECT_FALSE(id.ok());
  id = IdentityFromCertificate(
      CraftCert("a", "holder", "URI:gputravel://holder/a,URI:gputravel://holder/b"));
  EXPECT_FALSE(id.ok());
}

TEST(IdentityTest, SanDnsMustMatchIdentity) {
  // A holder certificate that also claims the MUX's server name.
  absl::StatusOr<Identity> id = IdentityFromCertificate(CraftCert(
      "a", "holder", "URI:gputravel://holder/a,DNS:a.holder.gputravel,DNS:m.mux.gputravel"));
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("m.mux.gputravel"), std::string::npos) << id.status();
  id = IdentityFromCertificate(CraftCert("a", "holder", "IP:127.0.0.1"));
  EXPECT_FALSE(id.ok());
  id = IdentityFromCertificate(
      CraftCert("a", "holder", "URI:gputravel://holder/a,DNS:a.holder.gputravel"));
  ASSERT_TRUE(id.ok()) << id.status();
}

TEST(IdentityTest, FallsBackToSubjectWithoutUri) {
  absl::StatusOr<Identity> id = IdentityFromCertificate(CraftCert("a", "mux", ""));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, (Identity{"mux", "a"}));
  id = IdentityFromCertificate(CraftCert("a", "admin", ""));
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("'admin'"), std::string::npos) << id.status();
}

}  // namespace
}  // namespace gputravel
