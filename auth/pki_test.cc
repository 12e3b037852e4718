#include "auth/pki.h"

#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "auth/test_server.h"
#include "auth/tls_config.h"
#include "gtest/gtest.h"
#include "keyxfer/ec_key.h"
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

bool PathExists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

TEST_F(PkiTest, WriteNewFileNeverFollowsOrReplaces) {
  const std::string target = tmp_.path() + "/target";
  ASSERT_TRUE(WriteFile(target, "precious", 0644).ok());
  // A symbolic link to an existing file is refused; the file is untouched.
  const std::string link = tmp_.path() + "/link";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  absl::Status s = WriteNewFile(link, "attacker", 0600);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_NE(s.message().find(link + " already exists"), std::string::npos) << s;
  EXPECT_EQ(*ReadFile(target), "precious");
  // A dangling link is refused and its target is not created.
  const std::string missing = tmp_.path() + "/missing";
  const std::string dangling = tmp_.path() + "/dangling";
  ASSERT_EQ(symlink(missing.c_str(), dangling.c_str()), 0);
  EXPECT_EQ(WriteNewFile(dangling, "x", 0600).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(PathExists(missing));
  // An existing file is neither truncated nor replaced.
  EXPECT_EQ(WriteNewFile(target, "x", 0600).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(*ReadFile(target), "precious");
  // A new file gets the contents and the mode.
  const std::string fresh = tmp_.path() + "/fresh";
  ASSERT_TRUE(WriteNewFile(fresh, "data", 0600).ok());
  EXPECT_EQ(*ReadFile(fresh), "data");
  EXPECT_EQ(ModeOf(fresh), 0600);
  // A failed open names the file and leaves nothing behind.
  s = WriteNewFile(tmp_.path() + "/no/such/dir/f", "x", 0600);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("cannot write " + tmp_.path() + "/no/such/dir/f"),
            std::string::npos)
      << s;
}

TEST_F(PkiTest, IssueRefusesSymlinkAtKeyPath) {
  ASSERT_TRUE(InitCampaignCa(Dir(), "trial", 30).ok());
  const Identity id{"holder", "hospital-a"};
  const std::string victim = tmp_.path() + "/victim";
  ASSERT_TRUE(WriteFile(victim, "precious", 0644).ok());
  ASSERT_EQ(symlink(victim.c_str(), IdentityKeyPath(Dir(), id).c_str()), 0);
  absl::StatusOr<IssuedFiles> r = IssueIdentity(Dir(), id, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(r.status().message().find(IdentityKeyPath(Dir(), id) + " already exists"),
            std::string::npos)
      << r.status();
  EXPECT_EQ(*ReadFile(victim), "precious") << "the link's target must be untouched";
  EXPECT_FALSE(PathExists(IdentityCertPath(Dir(), id))) << "no certificate without its key";
  // A dangling link at the CA key of a new campaign: its target is never
  // created, and no CA certificate is written.
  TempDir other;
  const std::string planted = tmp_.path() + "/planted.key";
  ASSERT_EQ(symlink(planted.c_str(), CaKeyPath(other.path()).c_str()), 0);
  EXPECT_EQ(InitCampaignCa(other.path(), "trial", 30).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(PathExists(planted));
  EXPECT_FALSE(PathExists(CaCertPath(other.path())));
}

TEST_F(PkiTest, RefusesDirectoryWritableByOthers) {
  const std::string shared = tmp_.path() + "/shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(chmod(shared.c_str(), 0777), 0);
  absl::Status s = InitCampaignCa(shared, "trial", 30);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find(shared + " is writable by other users (mode 0777)"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("chmod go-w " + shared), std::string::npos) << s;
  EXPECT_FALSE(PathExists(CaKeyPath(shared)));
  EXPECT_FALSE(PathExists(CaCertPath(shared)));
  // Issuing into a PKI directory that has become group-writable is refused too.
  ASSERT_TRUE(InitCampaignCa(Dir(), "trial", 30).ok());
  ASSERT_EQ(chmod(Dir().c_str(), 0770), 0);
  absl::StatusOr<IssuedFiles> r = IssueIdentity(Dir(), {"holder", "a"}, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("writable by its group (mode 0770)"), std::string::npos)
      << r.status();
  EXPECT_FALSE(PathExists(Dir() + "/holder-a.key"));
  ASSERT_EQ(chmod(Dir().c_str(), 0700), 0);
  EXPECT_TRUE(IssueIdentity(Dir(), {"holder", "a"}, 10).ok());
}

// keyxfer/x509 and auth's parser both refuse DER with bytes after the
// certificate.
// A CSR made by hand: `subject` entries (field, value), extensions requested
// as "nid:value" config strings, signed by `signer` (its own key unless
// another is given).
std::string MakeCsr(const std::vector<std::pair<std::string, std::string>>& subject,
                    const std::vector<std::pair<int, std::string>>& extensions,
                    const EcKey& key, const EcKey* signer = nullptr) {
  X509_REQ* req = X509_REQ_new();
  X509_REQ_set_version(req, 0);
  X509_NAME* name = X509_REQ_get_subject_name(req);
  for (const auto& [field, value] : subject) {
    X509_NAME_add_entry_by_txt(name, field.c_str(), MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1, 0);
  }
  X509_REQ_set_pubkey(req, key.pkey());
  if (!extensions.empty()) {
    STACK_OF(X509_EXTENSION)* exts = sk_X509_EXTENSION_new_null();
    for (const auto& [nid, value] : extensions) {
      X509V3_CTX ctx;
      X509V3_set_ctx_nodb(&ctx);
      X509V3_set_ctx(&ctx, nullptr, nullptr, req, nullptr, 0);
      sk_X509_EXTENSION_push(exts, X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
    }
    X509_REQ_add_extensions(req, exts);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  }
  X509_REQ_sign(req, (signer != nullptr ? signer : &key)->pkey(), EVP_sha384());
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509_REQ(bio, req);
  char* p = nullptr;
  long n = BIO_get_mem_data(bio, &p);
  std::string out(p, static_cast<size_t>(n));
  BIO_free(bio);
  X509_REQ_free(req);
  return out;
}

// The key is made where it lives (the TD's directory) and never written at
// the CA; the CA signs the request with exactly the policy of `pki issue`,
// and the result is a working TLS identity.
TEST_F(PkiTest, CsrKeepsTheKeyWhereItWasMadeAndSignAppliesTheIssuePolicy) {
  ASSERT_TRUE(InitCampaignCa(Dir(), "trial", 30).ok());
  const std::string td = tmp_.path() + "/td";
  const Identity id{"holder", "hospital-a"};
  absl::StatusOr<RequestFiles> req = CreateRequest(td, id);
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->key, td + "/holder-hospital-a.key");
  EXPECT_EQ(req->csr, td + "/holder-hospital-a.csr");
  EXPECT_EQ(ModeOf(td), 0700);
  EXPECT_EQ(ModeOf(req->key), 0600);
  const std::string csr = *ReadFile(req->csr);
  EXPECT_NE(csr.find("BEGIN CERTIFICATE REQUEST"), std::string::npos);
  EXPECT_EQ(csr.find("PRIVATE KEY"), std::string::npos);
  EXPECT_EQ(CreateRequest(td, id).status().code(), absl::StatusCode::kAlreadyExists);

  absl::StatusOr<std::string> cert = SignRequest(Dir(), csr, id, 10);
  ASSERT_TRUE(cert.ok()) << cert.status();
  EXPECT_EQ(*cert, IdentityCertPath(Dir(), id));
  EXPECT_EQ(ModeOf(IdentityKeyPath(Dir(), id)), -1) << "no key at the CA";
  Cert c = ReadCert(*cert);
  ASSERT_TRUE(c);
  PkeyPtr key = ParsePrivateKey(*ReadFile(req->key));
  ASSERT_TRUE(key);
  EXPECT_TRUE(KeyMatchesCertificate(key.get(), c.get()));
  // The same certificate profile as IssueIdentity.
  EXPECT_EQ(X509_check_ca(c.get()), 0);
  EXPECT_TRUE(ExtensionCritical(c.get(), NID_basic_constraints));
  EXPECT_EQ(X509_get_key_usage(c.get()), static_cast<uint32_t>(KU_DIGITAL_SIGNATURE));
  EXPECT_TRUE(X509_get_extended_key_usage(c.get()) & XKU_SSL_CLIENT);
  EXPECT_TRUE(X509_get_extended_key_usage(c.get()) & XKU_SSL_SERVER);
  EXPECT_EQ(SanText(c.get()),
            "DNS:hospital-a.holder.gputravel, URI:gputravel://holder/hospital-a");
  EXPECT_GT(SerialBits(c.get()), 120);
  absl::StatusOr<CertificateInfo> info = DescribeCertificate(*ReadFile(*cert));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->identity, id);
  // Kept at the CA by serial, for revocation.
  EXPECT_EQ(ModeOf(IssuedDir(Dir()) + "/" + info->serial + ".pem"), 0644);
  // Never overwritten.
  EXPECT_EQ(SignRequest(Dir(), csr, id, 10).status().code(), absl::StatusCode::kAlreadyExists);
  // The TD's key with the signed certificate is a TLS identity of the campaign.
  TlsFiles files{CaCertPath(Dir()), *cert, req->key, CrlPath(Dir())};
  EXPECT_TRUE(CheckTlsFiles(files).ok()) << CheckTlsFiles(files);
}

// The CA's operator names the identity; a request for another role or name
// is refused, and whatever extensions a request asks for are replaced by the
// policy's.
TEST_F(PkiTest, SignRefusesAnotherIdentityAndOverridesForgedExtensions) {
  ASSERT_TRUE(InitCampaignCa(Dir(), "trial", 30).ok());
  absl::StatusOr<EcKey> key = EcKey::Generate(Curve::kP384);
  ASSERT_TRUE(key.ok());
  const std::vector<std::pair<std::string, std::string>> holder_a = {
      {"O", "gputravel"}, {"OU", "holder"}, {"CN", "a"}};
  // A holder's request signed as an orchestrator, or as another holder.
  const std::string csr = MakeCsr(holder_a, {}, *key);
  absl::StatusOr<std::string> r = SignRequest(Dir(), csr, {"orchestrator", "a"}, 10);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("asks for Subject CN=a,OU=holder,O=gputravel but you are "
                                      "signing orchestrator 'a'"),
            std::string::npos)
      << r.status();
  EXPECT_EQ(SignRequest(Dir(), csr, {"holder", "b"}, 10).status().code(),
            absl::StatusCode::kPermissionDenied);
  // A request claiming the orchestrator role beside the holder's.
  const std::string two_roles = MakeCsr(
      {{"O", "gputravel"}, {"OU", "holder"}, {"OU", "orchestrator"}, {"CN", "a"}}, {}, *key);
  EXPECT_EQ(SignRequest(Dir(), two_roles, {"holder", "a"}, 10).status().code(),
            absl::StatusCode::kPermissionDenied);
  // Signed by a key other than the one it carries: no proof of possession.
  absl::StatusOr<EcKey> other = EcKey::Generate(Curve::kP384);
  ASSERT_TRUE(other.ok());
  r = SignRequest(Dir(), MakeCsr(holder_a, {}, *key, &*other), {"holder", "a"}, 10);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("does not verify"), std::string::npos) << r.status();
  EXPECT_EQ(ModeOf(IdentityCertPath(Dir(), {"holder", "a"})), -1) << "nothing signed yet";

  // Forged extensions: an orchestrator's SANs, CA:TRUE, certificate signing.
  const std::string forged = MakeCsr(
      holder_a,
      {{NID_subject_alt_name,
        "DNS:orch.orchestrator.gputravel,URI:gputravel://orchestrator/orch"},
       {NID_basic_constraints, "critical,CA:TRUE"},
       {NID_key_usage, "critical,keyCertSign,digitalSignature"}},
      *key);
  r = SignRequest(Dir(), forged, {"holder", "a"}, 10);
  ASSERT_TRUE(r.ok()) << r.status();
  Cert c = ReadCert(*r);
  ASSERT_TRUE(c);
  EXPECT_EQ(X509_check_ca(c.get()), 0);
  EXPECT_EQ(X509_get_key_usage(c.get()), static_cast<uint32_t>(KU_DIGITAL_SIGNATURE));
  EXPECT_EQ(SanText(c.get()), "DNS:a.holder.gputravel, URI:gputravel://holder/a");
  absl::StatusOr<Identity> id = IdentityFromCertificate(*ReadFile(*r));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, (Identity{"holder", "a"}));
  // Not a request at all.
  EXPECT_EQ(SignRequest(Dir(), "hello", {"holder", "c"}, 10).status().code(),
            absl::StatusCode::kInvalidArgument);
}

CrlPtr ReadCrl(const std::string& path) { return ParseCrlPem(*ReadFile(path)); }

// init publishes an empty CRL; revoke adds every certificate the CA signed
// for the identity (a re-issued one has several), signed by the CA with a
// rising number; crl republishes it.
TEST_F(PkiTest, RevokePublishesEveryCertificateOfTheIdentity) {
  ASSERT_TRUE(InitCampaignCa(Dir(), "trial", 30).ok());
  Cert ca = ReadCert(CaCertPath(Dir()));
  auto crl = ReadCrl(CrlPath(Dir()));
  ASSERT_TRUE(crl);
  EXPECT_EQ(X509_CRL_verify(crl.get(), X509_get0_pubkey(ca.get())), 1);
  EXPECT_LE(sk_X509_REVOKED_num(X509_CRL_get_REVOKED(crl.get())), 0);  // -1: no list at all
  EXPECT_EQ(InitCampaignCa(Dir(), "trial", 30).code(), absl::StatusCode::kAlreadyExists);

  const Identity a{"holder", "a"};
  ASSERT_TRUE(IssueIdentity(Dir(), a, 10).ok());
  const std::string first = DescribeCertificate(*ReadFile(IdentityCertPath(Dir(), a)))->serial;
  ASSERT_EQ(::unlink(IdentityCertPath(Dir(), a).c_str()), 0);
  ASSERT_EQ(::unlink(IdentityKeyPath(Dir(), a).c_str()), 0);
  ASSERT_TRUE(IssueIdentity(Dir(), a, 10).ok());
  const std::string second = DescribeCertificate(*ReadFile(IdentityCertPath(Dir(), a)))->serial;
  ASSERT_TRUE(IssueIdentity(Dir(), {"holder", "b"}, 10).ok());

  absl::StatusOr<CrlInfo> info = RevokeIdentity(Dir(), a, 7);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->number, 2);
  EXPECT_EQ(info->revoked, 2u);
  std::set<std::string> added(info->added.begin(), info->added.end());
  EXPECT_EQ(added, (std::set<std::string>{first, second}));
  crl = ReadCrl(CrlPath(Dir()));
  ASSERT_TRUE(crl);
  EXPECT_EQ(X509_CRL_verify(crl.get(), X509_get0_pubkey(ca.get())), 1);
  X509_REVOKED* entry = nullptr;
  EXPECT_EQ(X509_CRL_get0_by_cert(crl.get(), &entry, ReadCert(IdentityCertPath(Dir(), a)).get()),
            1);
  EXPECT_EQ(X509_CRL_get0_by_cert(crl.get(), &entry,
                                  ReadCert(IdentityCertPath(Dir(), {"holder", "b"})).get()),
            0);
  // Again: nothing new, the number still rises.
  info = RevokeIdentity(Dir(), a, 7);
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->added.empty());
  EXPECT_EQ(info->number, 3);
  EXPECT_EQ(RevokeIdentity(Dir(), {"holder", "nobody"}, 7).status().code(),
            absl::StatusCode::kNotFound);
  info = RefreshCrl(Dir(), 7);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->number, 4);
  EXPECT_EQ(info->revoked, 2u);
  // A CRL that is not the CA's is never extended.
  ASSERT_TRUE(WriteFile(CrlPath(Dir()), "junk", 0644).ok());
  EXPECT_EQ(RefreshCrl(Dir(), 7).status().code(), absl::StatusCode::kFailedPrecondition);
}

// ATTACK (whoever stole holder 'a''s private key, e.g. the host
// from the TD's disk or a holder after its trip; the certificate is public).
// The CA revokes 'a' and re-issues it the way its hints say: remove
// DIR/holder-a.pem and sign again. The TD's request file is still there
// (`pki csr` refuses to overwrite it), and `pki sign` certifies the very key
// whose certificate was just revoked, under a new serial the CRL does not
// list: the thief's key is a valid, unrevoked holder 'a' again. A key once
// revoked must never be certified again (for any identity): the CA keeps
// every certificate it signed (DIR/issued) and the CRL, so SignRequest can
// refuse a request whose public key is that of a revoked certificate (and
// the hint should say to make a new request with `pki csr`).
TEST_F(PkiTest, SignRefusesTheKeyOfARevokedCertificate) {
  ASSERT_TRUE(InitCampaignCa(Dir(), "trial", 30).ok());
  const std::string td = tmp_.path() + "/td";
  const Identity a{"holder", "a"};
  absl::StatusOr<RequestFiles> req = CreateRequest(td, a);
  ASSERT_TRUE(req.ok()) << req.status();
  const std::string csr = *ReadFile(req->csr);
  ASSERT_TRUE(SignRequest(Dir(), csr, a, 10).ok());
  ASSERT_TRUE(RevokeIdentity(Dir(), a, 7).ok());  // the key was stolen
  // Re-issue as the hint says: remove the certificate, sign again.
  ASSERT_EQ(::unlink(IdentityCertPath(Dir(), a).c_str()), 0);
  absl::StatusOr<std::string> again = SignRequest(Dir(), csr, a, 10);
  EXPECT_FALSE(again.ok()) << "the CA certified again a key whose certificate it revoked";
  if (again.ok()) {
    // What the thief gets: its stolen key with the new certificate passes a
    // daemon's TLS check against the current CRL.
    TlsFiles stolen{CaCertPath(Dir()), *again, req->key, CrlPath(Dir())};
    EXPECT_FALSE(CheckTlsFiles(stolen).ok())
        << "the stolen key of revoked holder 'a' is a valid identity again";
  }
}

TEST_F(PkiTest, DerWithTrailingBytesIsRefused) {
  ASSERT_TRUE(InitCampaignCa(Dir(), "trial", 30).ok());
  absl::StatusOr<IssuedFiles> f = IssueIdentity(Dir(), {"holder", "a"}, 10);
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<std::string> leaf = CertificatePemToDer(*ReadFile(f->cert));
  absl::StatusOr<std::string> ca = CertificatePemToDer(*ReadFile(CaCertPath(Dir())));
  ASSERT_TRUE(leaf.ok() && ca.ok());
  ASSERT_TRUE(VerifyCertificate(*leaf, *ca).ok());
  EXPECT_EQ(VerifyCertificate(*leaf + "x", *ca).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(VerifyCertificate(*leaf, *ca + std::string(1, '\0')).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CertificateDerToPem(*leaf).ok());
  EXPECT_FALSE(CertificateDerToPem(*leaf + "x").ok());
  absl::StatusOr<EcKey> key = EcKey::Generate(Curve::kP256);
  ASSERT_TRUE(key.ok());
  EXPECT_TRUE(IssueCertificate(*key, "x", *key, *ca + "x", false, 1).status().code() ==
              absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(DescribeCertificate(*leaf + "x").ok());
}

}  // namespace
}  // namespace gputravel
