#include "auth/role_gate.h"

#include <chrono>

#include "auth/pki.h"
#include "auth/test_server.h"
#include "auth/tls_config.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/holder.grpc.pb.h"

namespace gputravel {
namespace {

const Identity kOrch{"orchestrator", "orch"};
const Identity kOperator{"operator", "alice"};
const Identity kHolderA{"holder", "a"};
// Another orchestrator of the same campaign CA, not named by the gate.
const Identity kOtherOrch{"orchestrator", "other"};

// A real mTLS server whose service lets every role call GetInfo, behind a
// gate that lets only orchestrators call it and lists no other method: what
// the gate refuses never reaches the service.
class RoleGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeTestPki(Pki(), {kOrch, kOperator, kHolderA, kOtherOrch}).ok());
    auto creds = MakeServerCredentials(TestFiles(Pki(), kHolderA));
    ASSERT_TRUE(creds.ok()) << creds.status();
    InstallRoleGate(creds->get(), {{"/gputravel.v1.HolderAgent/GetInfo", {"orchestrator"}},
                                   {"/grpc.health.v1.Health/*", {"operator"}}},
                    {{"orchestrator", {"orch"}}});
    auto s = StartServer("unix:" + tmp_.path() + "/gate.sock", *creds,
                         std::make_unique<AuthProbeService>(std::vector<std::string>{
                             "orchestrator", "operator"}));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  std::string Pki() const { return tmp_.path() + "/pki"; }
  std::unique_ptr<v1::HolderAgent::Stub> StubAs(const Identity& caller) {
    auto ch = MakeSecureChannel(server_->endpoint, TestFiles(Pki(), caller), kHolderA);
    EXPECT_TRUE(ch.ok()) << ch.status();
    return v1::HolderAgent::NewStub(*ch);
  }

  TempDir tmp_;
  std::unique_ptr<RunningServer> server_;
};

TEST_F(RoleGateTest, RoleThatMayNotCallTheMethodIsRefusedBeforeTheService) {
  v1::HolderInfo info;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status s = StubAs(kOperator)->GetInfo(&ctx, {}, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_EQ(s.error_message(), "operator 'alice' may not call this; allowed roles: orchestrator");
  EXPECT_TRUE(info.name().empty()) << "the service answered";
}

TEST_F(RoleGateTest, AllowedRoleReachesTheService) {
  v1::HolderInfo info;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status s = StubAs(kOrch)->GetInfo(&ctx, {}, &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(info.name(), "orch");
}

// A certificate of the right role from the same CA is refused when the
// gate names the identities of that role, before the service.
TEST_F(RoleGateTest, UnnamedIdentityOfTheRightRoleIsRefusedBeforeTheService) {
  v1::HolderInfo info;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status s = StubAs(kOtherOrch)->GetInfo(&ctx, {}, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_EQ(s.error_message(),
            "orchestrator 'other' is not named in this server's configuration (it accepts only "
            "the orchestrator identities it names)");
  EXPECT_TRUE(info.name().empty()) << "the service answered";
}

TEST_F(RoleGateTest, MethodNotListedIsRefused) {
  v1::OpenChannelResponse out;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status s = StubAs(kOrch)->OpenChannel(&ctx, {}, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
  EXPECT_NE(s.error_message().find("/gputravel.v1.HolderAgent/OpenChannel is not served here"),
            std::string::npos)
      << s.error_message();
}

// With the CRL, every call is checked again: a client revoked after its
// connection's handshake gets no further call on that connection.
TEST(RoleGateCrlTest, CallerRevokedAfterTheHandshakeGetsNoFurtherCall) {
  TempDir tmp;
  const std::string pki = tmp.path() + "/pki";
  ASSERT_TRUE(MakeTestPki(pki, {kOrch, kHolderA}).ok());
  TlsFiles server_files = TestFiles(pki, kHolderA);
  server_files.crl = CrlPath(pki);
  nlohmann::json j = {{"ca", server_files.ca},
                      {"cert", server_files.cert},
                      {"key", server_files.key},
                      {"crl", server_files.crl}};
  absl::StatusOr<TlsFiles> parsed = ParseTlsConfig(j, "holder.json: tls");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_NE(RevocationListOf(*parsed), nullptr);
  auto creds = MakeServerCredentials(*parsed);
  ASSERT_TRUE(creds.ok()) << creds.status();
  InstallRoleGate(creds->get(), {{"/gputravel.v1.HolderAgent/GetInfo", {"orchestrator"}}}, {},
                  RevocationListOf(*parsed));
  auto server = StartServer("unix:" + tmp.path() + "/crl.sock", *creds,
                            std::make_unique<AuthProbeService>(
                                std::vector<std::string>{"orchestrator"}));
  ASSERT_TRUE(server.ok()) << server.status();
  // One channel, one connection, for both calls.
  auto ch = MakeSecureChannel((*server)->endpoint, TestFiles(pki, kOrch), kHolderA);
  ASSERT_TRUE(ch.ok()) << ch.status();
  auto stub = v1::HolderAgent::NewStub(*ch);
  auto call = [&stub](v1::HolderInfo* info) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub->GetInfo(&ctx, {}, info);
  };
  v1::HolderInfo info;
  ASSERT_TRUE(call(&info).ok());
  ASSERT_TRUE(RevokeIdentity(pki, kOrch, 1).ok());
  info.Clear();
  grpc::Status s = call(&info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_NE(s.error_message().find("orchestrator 'orch' is revoked"), std::string::npos)
      << s.error_message();
  EXPECT_TRUE(info.name().empty()) << "the service answered";
  EXPECT_EQ((*ch)->GetState(false), GRPC_CHANNEL_READY) << "the same connection was used";
}

}  // namespace
}  // namespace gputravel
