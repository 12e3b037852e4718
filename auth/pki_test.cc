#include "auth/pki.h"

#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <memory>

#include "auth/test_server.h"
#include "gtest/gtest.h"
#include "keyxfer/x509.h"
#include "util/files.h"

namespace gputravel {
namespace {

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
using Cert = std::unique_ptr<X509, X509Free>;

Cert ReadCert(const std::string& path) {
  std::string pem = *ReadFile(path);
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  Cert c(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  return c;
}

int ModeOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return -1;
  return st.st_mode & 0777;
}

bool ExtensionCritical(X509* c, int nid) {
  int idx = X509_get_ext_by_NID(c, nid, -1);
  return idx >= 0 && X509_EXTENSION_get_critical(X509_get_ext(c, idx)) == 1;
}

std::string SanText(X509* c) {
  int idx = X509_get_ext_by_NID(c, NID_subject_alt_name, -1);
  if (idx < 0) return "";
  BIO* bio = BIO_new(BIO_s_mem());
  X509V3_EXT_print(bio, X509_get_ext(c, idx), 0, 0);
  char* p = nullptr;
  long n = BIO_get_mem_data(bio, &p);
  std::string out(p, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

int SerialBits(X509* c) {
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(c), nullptr);
  int bits = BN_num_bits(bn);
  BN_free(bn);
  return bits;
}

class PkiTest : public ::testing::Test {
 protected:
  std::string Dir() const { return tmp_.path() + "/pki"; }
  TempDir tmp_;
};

TEST_F(PkiTest, InitWritesCa) {
  ASSERT_TRUE(InitCampaignCa(Dir(), "trial-1", 30).ok());
  EXPECT_EQ(ModeOf(Dir()), 0700);
  EXPECT_EQ(ModeOf(CaKeyPath(Dir())), 0600);
  Cert ca = ReadCert(CaCertPath(Dir()));
  ASSERT_TRUE(ca);
  EXPECT_EQ(X509_get_version(ca.get()), 2);  // v3
  EXPECT_EQ(X509_check_ca(ca.get()), 1);
  EXPECT_TRUE(ExtensionCritical(ca.get(), NID_basic_constraints));
  EXPECT_TRUE(ExtensionCritical(ca.get(), NID_key_usage));
  EXPECT_TRUE(X509_get_key_usage(ca.get()) & KU_KEY_CERT_SIGN);
  EXPECT_EQ(EVP_PKEY_get_bits(X509_get0_pubkey(ca.get())), 384);
  EXPECT_EQ(X509_check_issued(ca.get(), ca.get()), X509_V_OK);  // self-signed
  absl::StatusOr<CertificateInfo> info = DescribeCertificate(*ReadFile(CaCertPath(Dir())));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->is_ca);
  EXPECT_EQ(info->subject, "CN=trial-1,OU=campaign-ca,O=gputravel");
  EXPECT_EQ(info->issuer, info->subject);
}

TEST_F(PkiTest, InitRefusesToOverwrite) {
  ASSERT_TRUE(InitCampaignCa(Dir(), "trial", 30).ok());
  std::string before = *ReadFile(CaCertPath(Dir()));
  absl::Status again = InitCampaignCa(Dir(), "trial", 30);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(again.message().find(CaCertPath(Dir()) + " already exists"), std::string::npos)
      << again;
  EXPECT_EQ(*ReadFile(CaCertPath(Dir())), before);
  // A lone key file also blocks a new CA.
  TempDir other;
  ASSERT_TRUE(WriteFile(CaKeyPath(other.path()), "x", 0600).ok());
  EXPECT_EQ(InitCampaignCa(other.path(), "trial", 30).code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(PkiTest, InitRejectsBadCampaignAndDays) {
  absl::Status s = InitCampaignCa(Dir(), "Trial One", 30);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'Trial One'"), std::string::npos) << s;
  s = InitCampaignCa(Dir(), "trial", 0);
  EXPECT_NE(s.message().find("0 days"), std::string::npos) << s;
  EXPECT_FALSE(InitCampaignCa(tmp_.path() + "/no/such/parent", "trial", 30).ok());
}

TEST_F(PkiTest, IssueWritesIdentityCertificate) {
  ASSERT_TRUE(InitCampaignCa(Dir(), "trial", 30).ok());
  Identity id{"holder", "hospital-a"};
  absl::StatusOr<IssuedFiles> f = IssueIdentity(Dir(), id, 10);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->cert, Dir() + "/holder-hospital-a.pem");
  EXPECT_EQ(f->key, Dir() + "/holder-hospital-a.key");
  EXPECT_EQ(ModeOf(f->key), 0600);
  Cert c = ReadCert(f->cert);
  ASSERT_TRUE(c);
  EXPECT_EQ(X509_get_version(c.get()), 2);
  EXPECT_EQ(X509_check_ca(c.get()), 0);
  EXPECT_TRUE(ExtensionCritical(c.get(), NID_basic_constraints));
  EXPECT_TRUE(ExtensionCritical(c.get(), NID_key_usage));
  EXPECT_EQ(X509_get_key_usage(c.get()), static_cast<uint32_t>(KU_DIGITAL_SIGNATURE));
  uint32_t xku = X509_get_extended_key_usage(c.get());
  EXPECT_TRUE(xku & XKU_SSL_SERVER);
  EXPECT_TRUE(xku & XKU_SSL_CLIENT);
  EXPECT_EQ(SanText(c.get()),
            "DNS:hospital-a.holder.gputravel, URI:gputravel://holder/hospital-a");
  EXPECT_GT(SerialBits(c.get()), 120);
  EXPECT_LE(SerialBits(c.get()), 128);
  // Chains to the campaign CA.
  auto leaf_der = CertificatePemToDer(*ReadFile(f->cert));
  auto ca_der = CertificatePemToDer(*ReadFile(CaCertPath(Dir())));
  auto verified = VerifyCertificate(*leaf_der, *ca_der);
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_EQ(verified->common_name, "hospital-a");
  absl::StatusOr<CertificateInfo> info = DescribeCertificate(*ReadFile(f->cert));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->is_ca);
  EXPECT_EQ(info->identity, id);
  EXPECT_EQ(info->subject, "CN=hospital-a,OU=holder,O=gputravel");
  EXPECT_EQ(info->issuer, "CN=trial,OU=campaign-ca,O=gputravel");
  EXPECT_EQ(info->serial.size(), 32u);
  // Serials differ between certificates.
  absl::StatusOr<IssuedFiles> g = IssueIdentity(Dir(), {"holder", "hospital-b"}, 10);
  ASSERT_TRUE(g.ok());
  EXPECT_NE(DescribeCertificate(*ReadFile(g->cert))->serial, info->serial);
}

TEST_F(PkiTest, IssueRefusesToOverwrite) {
  ASSERT_TRUE(InitCampaignCa(Dir(), "trial", 30).ok());
  ASSERT_TRUE(IssueIdentity(Dir(), {"mux", "host1"}, 10).ok());
  std::string before = *ReadFile(Dir() + "/mux-host1.pem");
  absl::StatusOr<IssuedFiles> again = IssueIdentity(Dir(), {"mux", "host1"}, 10);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(again.status().message().find("mux-host1.pem already exists"), std::string::npos)
      << again.status();
  EXPECT_EQ(*ReadFile(Dir() + "/mux-host1.pem"), before);
}

TEST_F(PkiTest, IssueRejectsBadRoleAndName) {
  ASSERT_TRUE(InitCampaignCa(Dir(), "trial", 30).ok());
  absl::StatusOr<IssuedFiles> r = IssueIdentity(Dir(), {"admin", "x"}, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("unknown role 'admin'"), std::string::npos) << r.status();
  r = IssueIdentity(Dir(), {"holder", "Hospital/A"}, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("invalid name 'Hospital/A'"), std::string::npos)
      << r.status();
  r = IssueIdentity(Dir(), {"holder", "a"}, -1);
  EXPECT_FALSE(r.ok());
}

TEST_F(PkiTest, IssueNeedsCa) {
  absl::StatusOr<IssuedFiles> r = IssueIdentity(Dir(), {"holder", "a"}, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("gputravel pki init"), std::string::npos) << r.status();
}

TEST_F(PkiTest, IssueRefusesValidityBeyondCa) {
  ASSERT_TRUE(InitCampaignCa(Dir(), "trial", 10).ok());
  absl::StatusOr<IssuedFiles> r = IssueIdentity(Dir(), {"holder", "a"}, 365);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("outlasts the campaign CA"), std::string::npos)
      << r.status();
  EXPECT_TRUE(IssueIdentity(Dir(), {"holder", "a"}, 9).ok());
}

TEST_F(PkiTest, IssueRefusesMismatchedCaKey) {
  ASSERT_TRUE(InitCampaignCa(Dir(), "trial", 30).ok());
  TempDir other;
  ASSERT_TRUE(InitCampaignCa(other.path(), "other", 30).ok());
  ASSERT_TRUE(WriteFile(CaKeyPath(Dir()), *ReadFile(CaKeyPath(other.path())), 0600).ok());
  absl::StatusOr<IssuedFiles> r = IssueIdentity(Dir(), {"holder", "a"}, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is not the private key of"), std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace gputravel
