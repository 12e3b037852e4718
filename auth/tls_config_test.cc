#include "auth/tls_config.h"

#include <sys/stat.h>

#include <chrono>

#include "auth/pki.h"
#include "auth/test_server.h"
#include "gtest/gtest.h"
#include "keyxfer/x509.h"
#include "nlohmann/json.hpp"
#include "proto/holder.grpc.pb.h"
#include "util/files.h"

namespace gputravel {
namespace {

const Identity kOrch{"orchestrator", "orch"};
const Identity kHolderA{"holder", "a"};
const Identity kHolderB{"holder", "b"};
const Identity kMux{"mux", "host1"};

class TlsConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    ASSERT_TRUE(MakeTestPki(Pki(), {kOrch, kHolderA, kHolderB, kMux}).ok());
    // A second campaign, with an identically named holder.
    ASSERT_TRUE(MakeTestPki(OtherPki(), {kHolderA, kOrch}).ok());
  }
  std::string Pki() const { return tmp_.path() + "/pki"; }
  std::string OtherPki() const { return tmp_.path() + "/other"; }
  std::string Sock(const std::string& n) const { return "unix:" + tmp_.path() + "/" + n; }

  nlohmann::json Json(const TlsFiles& f) {
    nlohmann::json j = {{"ca", f.ca}, {"cert", f.cert}, {"key", f.key}};
    if (!f.crl.empty()) j["crl"] = f.crl;
    return j;
  }
  // `id`'s files with the campaign's CRL, parsed as a daemon does.
  TlsFiles WithCrl(const Identity& id) {
    TlsFiles f = TestFiles(Pki(), id);
    f.crl = CrlPath(Pki());
    absl::StatusOr<TlsFiles> parsed = ParseTlsConfig(Json(f), "test: tls");
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return parsed.ok() ? *parsed : f;
  }
  std::string ParseError(const nlohmann::json& j) {
    absl::StatusOr<TlsFiles> r = ParseTlsConfig(j, "orch.json: tls");
    EXPECT_FALSE(r.ok());
    return r.ok() ? "" : std::string(r.status().message());
  }

  // A server presenting `server_id` that lets orchestrators call GetInfo.
  std::unique_ptr<RunningServer> Serve(const std::string& address, const TlsFiles& files) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds =
        MakeServerCredentials(files);
    EXPECT_TRUE(creds.ok()) << creds.status();
    if (!creds.ok()) return nullptr;
    absl::StatusOr<std::unique_ptr<RunningServer>> s =
        StartServer(address, *creds,
                    std::make_unique<AuthProbeService>(std::vector<std::string>{"orchestrator"}));
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  grpc::Status GetInfo(std::shared_ptr<grpc::Channel> channel, v1::HolderInfo* out) {
    auto stub = v1::HolderAgent::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub->GetInfo(&ctx, v1::GetInfoRequest(), out);
  }

  grpc::Status GetInfoAs(const std::string& endpoint, const TlsFiles& client,
                         const Identity& expected_server, v1::HolderInfo* out) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> ch =
        MakeSecureChannel(endpoint, client, expected_server);
    EXPECT_TRUE(ch.ok()) << ch.status();
    if (!ch.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "no channel");
    return GetInfo(*ch, out);
  }

  TempDir tmp_;
};

TEST_F(TlsConfigTest, ParsesGoodConfig) {
  TlsFiles want = TestFiles(Pki(), kHolderA);
  absl::StatusOr<TlsFiles> f = ParseTlsConfig(Json(want), "holder.json: tls");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->ca, want.ca);
  EXPECT_EQ(f->cert, want.cert);
  EXPECT_EQ(f->key, want.key);
  absl::StatusOr<Identity> id = LocalIdentity(*f);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, kHolderA);
  EXPECT_TRUE(CheckTlsFiles(*f).ok());
}

TEST_F(TlsConfigTest, FieldErrorsNameTheField) {
  nlohmann::json j = Json(TestFiles(Pki(), kOrch));
  j.erase("cert");
  EXPECT_EQ(ParseError(j), "orch.json: tls.cert: missing");
  j = Json(TestFiles(Pki(), kOrch));
  j["key"] = 5;
  EXPECT_EQ(ParseError(j), "orch.json: tls.key: must be a string (a file path)");
  j["key"] = "";
  EXPECT_EQ(ParseError(j), "orch.json: tls.key: empty path");
  j = Json(TestFiles(Pki(), kOrch));
  j["certs"] = "x";
  EXPECT_EQ(ParseError(j), "orch.json: tls: unknown field 'certs' (did you mean 'cert'? accepted: ca, cert, crl, key)");
  EXPECT_NE(ParseError(nlohmann::json()).find("orch.json: tls: missing"), std::string::npos);
  EXPECT_NE(ParseError(nlohmann::json("x")).find("orch.json: tls: must be an object"),
            std::string::npos);
}

TEST_F(TlsConfigTest, UnreadableFile) {
  nlohmann::json j = Json(TestFiles(Pki(), kOrch));
  j["cert"] = tmp_.path() + "/nope.pem";
  std::string e = ParseError(j);
  EXPECT_EQ(e.rfind("orch.json: tls.cert: cannot read " + tmp_.path() + "/nope.pem", 0), 0u)
      << e;
  j = Json(TestFiles(Pki(), kOrch));
  j["ca"] = tmp_.path() + "/nope.pem";
  EXPECT_EQ(ParseError(j).rfind("orch.json: tls.ca: cannot read", 0), 0u);
  j = Json(TestFiles(Pki(), kOrch));
  j["key"] = Pki();  // A directory.
  EXPECT_EQ(ParseError(j).rfind("orch.json: tls.key:", 0), 0u);
}

TEST_F(TlsConfigTest, KeyMustMatchCertificate) {
  nlohmann::json j = Json(TestFiles(Pki(), kOrch));
  j["key"] = TestFiles(Pki(), kMux).key;
  std::string e = ParseError(j);
  EXPECT_EQ(e.rfind("orch.json: tls.key: " + j["key"].get<std::string>() +
                        " is not the private key of the certificate",
                    0),
            0u)
      << e;
  // Not a key at all (a certificate, private to its owner).
  const std::string not_key = tmp_.path() + "/not-a-key.pem";
  ASSERT_TRUE(WriteFile(not_key, *ReadFile(TestFiles(Pki(), kOrch).cert), 0600).ok());
  j["key"] = not_key;
  EXPECT_NE(ParseError(j).find("is not a PEM private key"), std::string::npos);
}

TEST_F(TlsConfigTest, CertificateMustChainToCa) {
  TlsFiles f = TestFiles(OtherPki(), kOrch);
  f.ca = CaCertPath(Pki());
  std::string e = ParseError(Json(f));
  EXPECT_EQ(e.rfind("orch.json: tls.cert: " + f.cert + " does not chain to the CA " + f.ca, 0),
            0u)
      << e;
  // Swapped ca and cert.
  f = TestFiles(Pki(), kOrch);
  std::swap(f.ca, f.cert);
  EXPECT_NE(ParseError(Json(f)).find("tls.ca: " + f.ca + " is not a CA certificate"),
            std::string::npos);
}

TEST_F(TlsConfigTest, MtlsOverUnixSocket) {
  auto server = Serve(Sock("a.sock"), TestFiles(Pki(), kHolderA));
  ASSERT_TRUE(server);
  v1::HolderInfo info;
  grpc::Status s = GetInfoAs(server->endpoint, TestFiles(Pki(), kOrch), kHolderA, &info);
  ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  EXPECT_EQ(info.name(), "orch");
  EXPECT_EQ(info.domain(), "orchestrator");
}

TEST_F(TlsConfigTest, MtlsOverTcpLoopback) {
  auto server = Serve("127.0.0.1:0", TestFiles(Pki(), kHolderA));
  ASSERT_TRUE(server);
  ASSERT_NE(server->endpoint, "127.0.0.1:0");
  v1::HolderInfo info;
  grpc::Status s = GetInfoAs(server->endpoint, TestFiles(Pki(), kOrch), kHolderA, &info);
  ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  EXPECT_EQ(info.name(), "orch");
  EXPECT_EQ(info.domain(), "orchestrator");
}

TEST_F(TlsConfigTest, ClientWithoutCertificateIsRefused) {
  auto server = Serve(Sock("a.sock"), TestFiles(Pki(), kHolderA));
  ASSERT_TRUE(server);
  // TLS, trusting the server, but presenting no certificate.
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = *ReadFile(CaCertPath(Pki()));
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride(ServerNameFor(kHolderA));
  v1::HolderInfo info;
  grpc::Status s = GetInfo(
      grpc::CreateCustomChannel(server->endpoint, grpc::SslCredentials(opts), args), &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  // No TLS at all.
  s = GetInfo(grpc::CreateChannel(server->endpoint, grpc::InsecureChannelCredentials()), &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(TlsConfigTest, ClientFromAnotherCaIsRefused) {
  auto server = Serve(Sock("a.sock"), TestFiles(Pki(), kHolderA));
  ASSERT_TRUE(server);
  // Trusts this campaign's CA (so it would accept the server) but presents an
  // orchestrator certificate of another campaign.
  TlsFiles other = TestFiles(OtherPki(), kOrch);
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = *ReadFile(CaCertPath(Pki()));
  opts.pem_cert_chain = *ReadFile(other.cert);
  opts.pem_private_key = *ReadFile(other.key);
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride(ServerNameFor(kHolderA));
  v1::HolderInfo info;
  grpc::Status s = GetInfo(
      grpc::CreateCustomChannel(server->endpoint, grpc::SslCredentials(opts), args), &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  // MakeSecureChannel itself refuses such a mixture up front.
  other.ca = CaCertPath(Pki());
  EXPECT_FALSE(MakeSecureChannel(server->endpoint, other, kHolderA).ok());
}

TEST_F(TlsConfigTest, ClientRefusesServerWithOtherIdentity) {
  // Holder 'b' and the MUX answer where the orchestrator expects holder 'a'.
  auto b = Serve(Sock("b.sock"), TestFiles(Pki(), kHolderB));
  auto mux = Serve(Sock("mux.sock"), TestFiles(Pki(), kMux));
  auto other = Serve(Sock("other.sock"), TestFiles(OtherPki(), kHolderA));
  ASSERT_TRUE(b && mux && other);
  v1::HolderInfo info;
  for (const std::string& endpoint : {b->endpoint, mux->endpoint, other->endpoint}) {
    grpc::Status s = GetInfoAs(endpoint, TestFiles(Pki(), kOrch), kHolderA, &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE)
        << endpoint << ": " << s.error_message();
  }
  // The same servers are accepted under their own names.
  EXPECT_TRUE(GetInfoAs(b->endpoint, TestFiles(Pki(), kOrch), kHolderB, &info).ok());
  EXPECT_TRUE(GetInfoAs(mux->endpoint, TestFiles(Pki(), kOrch), kMux, &info).ok());
}

TEST_F(TlsConfigTest, CredentialConstructorsCheckInputs) {
  TlsFiles bad = TestFiles(Pki(), kOrch);
  bad.key = TestFiles(Pki(), kMux).key;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> sc = MakeServerCredentials(bad);
  ASSERT_FALSE(sc.ok());
  EXPECT_NE(sc.status().message().find("TLS key: "), std::string::npos) << sc.status();
  EXPECT_FALSE(MakeSecureChannel(Sock("x"), bad, kHolderA).ok());
  EXPECT_FALSE(MakeSecureChannel("", TestFiles(Pki(), kOrch), kHolderA).ok());
  absl::StatusOr<std::shared_ptr<grpc::Channel>> ch =
      MakeSecureChannel(Sock("x"), TestFiles(Pki(), kOrch), Identity{"root", "a"});
  ASSERT_FALSE(ch.ok());
  EXPECT_NE(ch.status().message().find("unknown role 'root'"), std::string::npos);
  // A Unix socket path longer than the kernel takes is named, not left to
  // gRPC's "Failed to create secure client channel".
  const std::string long_path = "/" + std::string(120, 'p') + ".sock";
  ch = MakeSecureChannel("unix:" + long_path, TestFiles(Pki(), kOrch), kHolderA);
  ASSERT_FALSE(ch.ok());
  EXPECT_EQ(ch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ch.status().message(),
            "Unix socket path too long (max 107 bytes, this one has 126): " + long_path);
}

TEST_F(TlsConfigTest, CaFileMustHoldOneCertificate) {
  // This campaign's CA followed by another campaign's: only the first would
  // be checked, but gRPC would trust both.
  const std::string bundle = tmp_.path() + "/bundle.pem";
  ASSERT_TRUE(
      WriteFile(bundle, *ReadFile(CaCertPath(Pki())) + *ReadFile(CaCertPath(OtherPki()))).ok());
  nlohmann::json j = Json(TestFiles(Pki(), kOrch));
  j["ca"] = bundle;
  std::string e = ParseError(j);
  EXPECT_EQ(e.rfind("orch.json: tls.ca: " + bundle + " holds 2 certificates", 0), 0u) << e;
  EXPECT_NE(e.find("one campaign CA per file"), std::string::npos) << e;
  TlsFiles f = TestFiles(Pki(), kOrch);
  f.ca = bundle;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> sc = MakeServerCredentials(f);
  ASSERT_FALSE(sc.ok());
  EXPECT_NE(sc.status().message().find("TLS ca: " + bundle + " holds 2 certificates"),
            std::string::npos)
      << sc.status();
  EXPECT_FALSE(MakeSecureChannel(Sock("x"), f, kHolderA).ok());
  EXPECT_FALSE(CheckTlsFiles(f).ok());
}

TEST_F(TlsConfigTest, DerCaFileIsHandedToGrpcAsTheCheckedCertificate) {
  absl::StatusOr<std::string> der = CertificatePemToDer(*ReadFile(CaCertPath(Pki())));
  ASSERT_TRUE(der.ok()) << der.status();
  const std::string der_path = tmp_.path() + "/ca.der";
  ASSERT_TRUE(WriteFile(der_path, *der).ok());
  TlsFiles server_files = TestFiles(Pki(), kHolderA);
  server_files.ca = der_path;
  TlsFiles client_files = TestFiles(Pki(), kOrch);
  client_files.ca = der_path;
  ASSERT_TRUE(CheckTlsFiles(client_files).ok());
  auto server = Serve(Sock("der.sock"), server_files);
  ASSERT_TRUE(server);
  v1::HolderInfo info;
  grpc::Status s = GetInfoAs(server->endpoint, client_files, kHolderA, &info);
  ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  EXPECT_EQ(info.name(), "orch");
}

TEST_F(TlsConfigTest, KeepaliveChannelCalls) {
  auto server = Serve(Sock("ka.sock"), TestFiles(Pki(), kHolderA));
  ASSERT_TRUE(server);
  SecureChannelOptions options;
  options.keepalive = true;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> ch =
      MakeSecureChannel(server->endpoint, TestFiles(Pki(), kOrch), kHolderA, options);
  ASSERT_TRUE(ch.ok()) << ch.status();
  v1::HolderInfo info;
  grpc::Status s = GetInfo(*ch, &info);
  ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  EXPECT_EQ(info.domain(), "orchestrator");
}

// A private key others may read is refused, naming the file and the fix.
TEST_F(TlsConfigTest, KeyReadableByOthersRefused) {
  TlsFiles f = TestFiles(Pki(), kOrch);
  ASSERT_EQ(::chmod(f.key.c_str(), 0644), 0);
  const std::string err = ParseError(Json(f));
  EXPECT_NE(err.find("orch.json: tls.key: " + f.key + " may be read or written by group or "
                     "others (mode 0644)"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("chmod 600"), std::string::npos) << err;
  EXPECT_FALSE(CheckTlsFiles(f).ok());
  ASSERT_EQ(::chmod(f.key.c_str(), 0640), 0);
  EXPECT_FALSE(CheckTlsFiles(f).ok());
  ASSERT_EQ(::chmod(f.key.c_str(), 0600), 0);
  EXPECT_TRUE(CheckTlsFiles(f).ok());
}

// What ParseTlsConfig read is what every later channel and server uses: the
// files are not read again (a host that replaces them after start-up
// changes nothing), and the CA can be checked against what was measured.
TEST_F(TlsConfigTest, FilesAreReadOnceAtParse) {
  TlsFiles server_files = TestFiles(Pki(), kHolderA);
  absl::StatusOr<TlsFiles> server = ParseTlsConfig(Json(server_files), "holder.json: tls");
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<TlsFiles> client = ParseTlsConfig(Json(TestFiles(Pki(), kOrch)), "orch.json: tls");
  ASSERT_TRUE(client.ok()) << client.status();
  const std::string ca_bytes = *ReadFile(client->ca);
  EXPECT_TRUE(RequireTlsCaBytes(*client, ca_bytes).ok());
  EXPECT_EQ(RequireTlsCaBytes(*client, ca_bytes + "\n").code(),
            absl::StatusCode::kFailedPrecondition);
  // The host replaces every file with another campaign's.
  for (const auto& [mine, other] :
       {std::pair<std::string, std::string>{client->ca, CaCertPath(OtherPki())},
        {client->cert, TestFiles(OtherPki(), kOrch).cert},
        {client->key, TestFiles(OtherPki(), kOrch).key},
        {server->ca, CaCertPath(OtherPki())}}) {
    ASSERT_TRUE(WriteFile(mine, *ReadFile(other), 0600).ok());
  }
  auto running = Serve(Sock("s.sock"), *server);
  ASSERT_NE(running, nullptr);
  v1::HolderInfo info;
  grpc::Status st = GetInfoAs(Sock("s.sock"), *client, kHolderA, &info);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(RequireTlsCaBytes(*client, ca_bytes).ok());
}

// A certificate revoked while the daemons run is refused at the next TLS
// handshake, by a server (the client's) and by a client (the server's), and
// the client's error says why; the CRL is reread without a restart.
TEST_F(TlsConfigTest, RevokedCertificateIsRefusedAtTheNextHandshakeEitherWay) {
  TlsFiles holder = WithCrl(kHolderA);
  TlsFiles orch = WithCrl(kOrch);
  TlsFiles holder_b = WithCrl(kHolderB);
  auto server_a = Serve(Sock("a.sock"), holder);
  auto server_b = Serve(Sock("b.sock"), holder_b);
  ASSERT_TRUE(server_a && server_b);
  v1::HolderInfo info;
  grpc::Status s = GetInfoAs(server_a->endpoint, orch, kHolderA, &info);
  ASSERT_TRUE(s.ok()) << s.error_message();

  // The server's certificate is revoked: the client refuses it, saying so.
  absl::StatusOr<CrlInfo> crl = RevokeIdentity(Pki(), kHolderA, 1);
  ASSERT_TRUE(crl.ok()) << crl.status();
  EXPECT_EQ(crl->added.size(), 1u);
  EXPECT_EQ(crl->number, 2);
  s = GetInfoAs(server_a->endpoint, orch, kHolderA, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_NE(s.error_message().find("holder 'a' is revoked"), std::string::npos)
      << s.error_message();
  // Others are unaffected.
  s = GetInfoAs(server_b->endpoint, orch, kHolderB, &info);
  EXPECT_TRUE(s.ok()) << s.error_message();

  // The client's certificate is revoked: the server refuses the handshake
  // (checked here with a client that does not look at the CRL itself).
  ASSERT_TRUE(RevokeIdentity(Pki(), kOrch, 1).ok());
  s = GetInfoAs(server_b->endpoint, TestFiles(Pki(), kOrch), kHolderB, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  // Another orchestrator identity of the campaign still gets through.
  ASSERT_TRUE(IssueIdentity(Pki(), Identity{"orchestrator", "orch2"}, 1).ok());
  s = GetInfoAs(server_b->endpoint, TestFiles(Pki(), Identity{"orchestrator", "orch2"}), kHolderB,
                &info);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(info.name(), "orch2");
}

// A daemon refuses to start with a CRL the CA did not sign or that revokes
// its own certificate; a CRL swapped for an older one (or removed) while it
// runs does not un-revoke anything.
TEST_F(TlsConfigTest, CrlMustBeTheCasAndCannotBeRolledBack) {
  TlsFiles f = TestFiles(Pki(), kOrch);
  f.crl = CrlPath(OtherPki());
  std::string e = ParseError(Json(f));
  EXPECT_NE(e.find("orch.json: tls.crl: CRL " + f.crl), std::string::npos) << e;
  f.crl = tmp_.path() + "/none.pem";
  EXPECT_NE(ParseError(Json(f)).find("tls.crl: CRL " + f.crl), std::string::npos);
  nlohmann::json j = Json(TestFiles(Pki(), kOrch));
  j["crl"] = 3;
  EXPECT_EQ(ParseError(j), "orch.json: tls.crl: must be a non-empty string (a file path)");

  const std::string old_crl = *ReadFile(CrlPath(Pki()));
  ASSERT_TRUE(RevokeIdentity(Pki(), kHolderA, 1).ok());
  f = TestFiles(Pki(), kHolderA);
  f.crl = CrlPath(Pki());
  e = ParseError(Json(f));
  EXPECT_NE(e.find("holder 'a' is revoked"), std::string::npos) << e;

  TlsFiles orch = WithCrl(kOrch);
  auto server = Serve(Sock("a.sock"), TestFiles(Pki(), kHolderA));
  ASSERT_TRUE(server);
  v1::HolderInfo info;
  EXPECT_FALSE(GetInfoAs(server->endpoint, orch, kHolderA, &info).ok());
  // The host puts the older CRL back, then removes the file.
  ASSERT_TRUE(WriteFile(CrlPath(Pki()) + ".old", old_crl, 0644).ok());
  ASSERT_EQ(::rename((CrlPath(Pki()) + ".old").c_str(), CrlPath(Pki()).c_str()), 0);
  grpc::Status s = GetInfoAs(server->endpoint, orch, kHolderA, &info);
  EXPECT_NE(s.error_message().find("is revoked"), std::string::npos) << s.error_message();
  ASSERT_EQ(::unlink(CrlPath(Pki()).c_str()), 0);
  s = GetInfoAs(server->endpoint, orch, kHolderA, &info);
  EXPECT_NE(s.error_message().find("is revoked"), std::string::npos) << s.error_message();
}

}  // namespace
}  // namespace gputravel
