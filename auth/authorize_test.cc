#include "auth/authorize.h"

#include <chrono>

#include "auth/test_server.h"
#include "auth/tls_config.h"
#include "gtest/gtest.h"
#include "proto/holder.grpc.pb.h"

namespace gputravel {
namespace {

const Identity kOrch{"orchestrator", "orch"};
const Identity kScheduler{"scheduler", "sched"};
const Identity kOperator{"operator", "alice"};
const Identity kHolderA{"holder", "a"};
const Identity kHolderB{"holder", "b"};
const Identity kMux{"mux", "host1"};
const Identity kTrainer{"trainer", "t0"};

// Real gRPC servers with mTLS on Unix sockets, presenting holder 'a': one runs
// Authorize({orchestrator, scheduler}), one AuthorizeSelf(holder, act-as).
class AuthorizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        MakeTestPki(Pki(), {kOrch, kScheduler, kOperator, kHolderA, kHolderB, kMux, kTrainer})
            .ok());
    server_ = Start("unix:" + tmp_.path() + "/a.sock", {"orchestrator", "scheduler"});
    ASSERT_TRUE(server_);
    auto creds = MakeServerCredentials(TestFiles(Pki(), kHolderA));
    ASSERT_TRUE(creds.ok()) << creds.status();
    auto self = StartServer("unix:" + tmp_.path() + "/self.sock", *creds,
                            AuthProbeService::SelfMode());
    ASSERT_TRUE(self.ok()) << self.status();
    self_ = std::move(*self);
  }
  std::string Pki() const { return tmp_.path() + "/pki"; }

  std::unique_ptr<RunningServer> Start(const std::string& address,
                                       std::vector<std::string> roles) {
    auto creds = MakeServerCredentials(TestFiles(Pki(), kHolderA));
    EXPECT_TRUE(creds.ok()) << creds.status();
    if (!creds.ok()) return nullptr;
    auto s = StartServer(address, *creds, std::make_unique<AuthProbeService>(std::move(roles)));
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  std::unique_ptr<v1::HolderAgent::Stub> StubAs(const Identity& caller,
                                                const std::string& endpoint) {
    auto ch = MakeSecureChannel(endpoint, TestFiles(Pki(), caller), kHolderA);
    EXPECT_TRUE(ch.ok()) << ch.status();
    return v1::HolderAgent::NewStub(*ch);
  }

  grpc::Status GetInfo(v1::HolderAgent::Stub* stub, v1::HolderInfo* out) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub->GetInfo(&ctx, v1::GetInfoRequest(), out);
  }
  grpc::Status GetInfoAs(const Identity& caller, v1::HolderInfo* out) {
    return GetInfo(StubAs(caller, server_->endpoint).get(), out);
  }
  // Caller `caller` claims to act as holder `as` (server in self mode).
  grpc::Status ActAs(const Identity& caller, const std::string& as, v1::HolderInfo* out) {
    auto stub = StubAs(caller, self_->endpoint);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ctx.AddMetadata("act-as", as);
    return stub->GetInfo(&ctx, v1::GetInfoRequest(), out);
  }

  TempDir tmp_;
  std::unique_ptr<RunningServer> server_;
  std::unique_ptr<RunningServer> self_;
};

TEST_F(AuthorizeTest, AllowedRoleSeesExactIdentity) {
  v1::HolderInfo info;
  grpc::Status s = GetInfoAs(kOrch, &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(info.domain(), "orchestrator");
  EXPECT_EQ(info.name(), "orch");
  s = GetInfoAs(kScheduler, &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(info.domain(), "scheduler");
  EXPECT_EQ(info.name(), "sched");
}

TEST_F(AuthorizeTest, DisallowedRoleIsDeniedWithMessage) {
  v1::HolderInfo info;
  grpc::Status s = GetInfoAs(kHolderB, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(),
            "holder 'b' may not call this; allowed roles: orchestrator, scheduler");
  s = GetInfoAs(kMux, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(),
            "mux 'host1' may not call this; allowed roles: orchestrator, scheduler");
  s = GetInfoAs(kTrainer, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

// "Operators cannot obtain keys or data": a key-handling method allows only
// the orchestrator, so an operator's call is refused before it runs.
TEST_F(AuthorizeTest, OperatorCannotCallKeyMethods) {
  auto keys = Start("unix:" + tmp_.path() + "/keys.sock", {"orchestrator"});
  ASSERT_TRUE(keys);
  v1::HolderInfo info;
  grpc::Status s = GetInfo(StubAs(kOperator, keys->endpoint).get(), &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(), "operator 'alice' may not call this; allowed roles: orchestrator");
  s = GetInfo(StubAs(kScheduler, keys->endpoint).get(), &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(GetInfo(StubAs(kOrch, keys->endpoint).get(), &info).ok());
}

TEST_F(AuthorizeTest, NoRolesAllowedDeniesEveryone) {
  auto none = Start("unix:" + tmp_.path() + "/none.sock", {});
  ASSERT_TRUE(none);
  v1::HolderInfo info;
  grpc::Status s = GetInfo(StubAs(kOrch, none->endpoint).get(), &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(), "orchestrator 'orch' may not call this; allowed roles: none");
}

TEST_F(AuthorizeTest, HolderActsOnlyAsItself) {
  v1::HolderInfo info;
  grpc::Status s = ActAs(kHolderA, "a", &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(info.name(), "a");
  s = ActAs(kHolderB, "a", &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(), "holder 'b' may not act as holder 'a'");
  // Same name, other role.
  s = ActAs(kOrch, "orch", &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(), "orchestrator 'orch' may not act as holder 'orch'");
}

TEST_F(AuthorizeTest, UnauthenticatedCallIsRefused) {
  // A server without TLS: Authorize finds no client certificate.
  grpc::ServerBuilder b;
  auto service = std::make_unique<AuthProbeService>(std::vector<std::string>{"orchestrator"});
  std::string address = "unix:" + tmp_.path() + "/plain.sock";
  b.AddListeningPort(address, grpc::InsecureServerCredentials());
  b.RegisterService(service.get());
  std::unique_ptr<grpc::Server> plain = b.BuildAndStart();
  ASSERT_TRUE(plain);
  auto stub =
      v1::HolderAgent::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  v1::HolderInfo info;
  grpc::Status s = GetInfo(stub.get(), &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message().rfind("no client certificate", 0), 0u) << s.error_message();
  plain->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

}  // namespace
}  // namespace gputravel
