// Authorization across the real emulated stack: every daemon (orchestrator,
// holder agents, MUX) as its own process, mTLS on every gRPC connection, and
// one test per rule of who may call what.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "auth/identity.h"
#include "auth/pki.h"
#include "auth/test_server.h"
#include "auth/tls_config.h"
#include "cli/emulated_stack.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "keyxfer/random.h"
#include "nlohmann/json.hpp"
#include "proto/holder.grpc.pb.h"
#include "proto/mux.grpc.pb.h"
#include "proto/orchestrator.grpc.pb.h"
#include "util/files.h"
#include "util/hex.h"
#include "util/subprocess.h"

namespace gputravel {
namespace {

const Identity kOrch{kRoleOrchestrator, "orchestrator"};
const Identity kMux{kRoleMux, "mux"};
const Identity kOperator{kRoleOperator, "operator"};
const Identity kScheduler{kRoleScheduler, "scheduler"};
const Identity kTrainer{kRoleTrainer, "trainer"};
const Identity kHolderA{kRoleHolder, "holder-a"};
const Identity kHolderB{kRoleHolder, "holder-b"};
// An orchestrator certificate of this campaign's CA that the host's
// administrator did not pin at the MUX: what the tenant can always mint.
const Identity kUnpinnedOrch{kRoleOrchestrator, "second-orchestrator"};

constexpr char kControlRoles[] = "allowed roles: operator, scheduler";
constexpr char kOnlyOrchestrator[] = "allowed roles: orchestrator";

void WithDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(15));
}

// PERMISSION_DENIED whose message names the caller and the allowed roles.
void ExpectDenied(const grpc::Status& s, const Identity& caller, const std::string& allowed,
                  const std::string& what) {
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << what << ": " << s.error_code() << " " << s.error_message();
  EXPECT_NE(s.error_message().find(DescribeIdentity(caller) + " may not call this"),
            std::string::npos)
      << what << ": " << s.error_message();
  EXPECT_NE(s.error_message().find(allowed), std::string::npos)
      << what << ": " << s.error_message();
}

// The TLS handshake fails: the call never reaches the service.
void ExpectRefusedAtHandshake(const grpc::Status& s, const std::string& what) {
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE)
      << what << ": " << s.error_code() << " " << s.error_message();
}

class AuthorizationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    StackOptions o;
    o.holders = 2;
    o.dataset_bytes = {256u << 10, 384u << 10};
    o.buffer_bytes = 1u << 20;
    o.holder_training_policy["min_window_bytes"] = 4096;  // windows under 1 MiB
    o.chunk_bytes = 256u << 10;
    o.trainer = false;
    auto st = EmulatedStack::Start(o);
    ASSERT_TRUE(st.ok()) << st.status();
    stack_ = st->release();
    // Identities the stack does not issue: a trainer, from the campaign CA.
    auto trainer = IssueIdentity(stack_->tls_dir(), kTrainer, 1);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    auto unpinned = IssueIdentity(stack_->tls_dir(), kUnpinnedOrch, 1);
    ASSERT_TRUE(unpinned.ok()) << unpinned.status();
    // Another campaign's CA, issuing the same names as this campaign's.
    other_ = new TempDir();
    ASSERT_TRUE(MakeTestPki(OtherPki(), {kOrch, kOperator, kHolderA}).ok());
  }
  static void TearDownTestSuite() {
    delete stack_;
    stack_ = nullptr;
    delete other_;
    other_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(stack_, nullptr) << "the stack did not start"; }

  static std::string OtherPki() { return other_->path() + "/other-ca"; }
  static std::string HolderEndpoint(const std::string& name) {
    return "unix:" + stack_->dir() + "/" + name + ".sock";
  }

  // mTLS as `client` (a certificate of this campaign), expecting `server`.
  static std::shared_ptr<grpc::Channel> As(const Identity& client, const std::string& endpoint,
                                           const Identity& server) {
    auto ch = MakeSecureChannel(endpoint, stack_->tls(client), server);
    EXPECT_TRUE(ch.ok()) << ch.status();
    return ch.ok() ? *ch : nullptr;
  }
  // TLS that trusts the campaign CA but presents no client certificate.
  static std::shared_ptr<grpc::Channel> NoClientCert(const std::string& endpoint,
                                                     const Identity& server) {
    grpc::SslCredentialsOptions opts;
    opts.pem_root_certs = *ReadFile(CaCertPath(stack_->tls_dir()));
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride(ServerNameFor(server));
    return grpc::CreateCustomChannel(endpoint, grpc::SslCredentials(opts), args);
  }
  // TLS that trusts the campaign CA (so it accepts the server) but presents
  // `client`'s certificate from another campaign's CA.
  static std::shared_ptr<grpc::Channel> FromOtherCa(const Identity& client,
                                                    const std::string& endpoint,
                                                    const Identity& server) {
    TlsFiles other = TestFiles(OtherPki(), client);
    grpc::SslCredentialsOptions opts;
    opts.pem_root_certs = *ReadFile(CaCertPath(stack_->tls_dir()));
    opts.pem_cert_chain = *ReadFile(other.cert);
    opts.pem_private_key = *ReadFile(other.key);
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride(ServerNameFor(server));
    return grpc::CreateCustomChannel(endpoint, grpc::SslCredentials(opts), args);
  }
  static std::shared_ptr<grpc::Channel> Plaintext(const std::string& endpoint) {
    return grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  }

  // One call per API, on a given channel.
  static grpc::Status ListCampaigns(std::shared_ptr<grpc::Channel> ch,
                                    v1::ListCampaignsResponse* out = nullptr) {
    v1::ListCampaignsResponse ignored;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    return v1::Orchestrator::NewStub(ch)->ListCampaigns(&ctx, {}, out ? out : &ignored);
  }
  static grpc::Status CreateCampaign(std::shared_ptr<grpc::Channel> ch, const std::string& name,
                                     v1::CreateCampaignResponse* out = nullptr,
                                     nlohmann::json spec = nullptr) {
    if (spec.is_null()) spec = stack_->CampaignSpec();
    spec["name"] = name;
    v1::CreateCampaignRequest req;
    req.set_request_id(HexEncode(RandomString(16)));
    req.set_spec_json(spec.dump());
    v1::CreateCampaignResponse ignored;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    return v1::Orchestrator::NewStub(ch)->CreateCampaign(&ctx, req, out ? out : &ignored);
  }
  static grpc::Status GetCampaign(std::shared_ptr<grpc::Channel> ch, const std::string& name,
                                  v1::Campaign* out = nullptr) {
    v1::GetCampaignRequest req;
    req.set_name(name);
    v1::Campaign ignored;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    return v1::Orchestrator::NewStub(ch)->GetCampaign(&ctx, req, out ? out : &ignored);
  }
  enum class Control { kStart, kPause, kResume, kCancel };
  static grpc::Status ControlCampaign(std::shared_ptr<grpc::Channel> ch, Control c,
                                      const std::string& name) {
    v1::CampaignRef ref;
    ref.set_name(name);
    v1::Campaign out;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    auto stub = v1::Orchestrator::NewStub(ch);
    switch (c) {
      case Control::kStart: return stub->StartCampaign(&ctx, ref, &out);
      case Control::kPause: return stub->PauseCampaign(&ctx, ref, &out);
      case Control::kResume: return stub->ResumeCampaign(&ctx, ref, &out);
      case Control::kCancel: return stub->CancelCampaign(&ctx, ref, &out);
    }
    return grpc::Status::CANCELLED;
  }
  static grpc::Status WatchCampaign(std::shared_ptr<grpc::Channel> ch, const std::string& name) {
    v1::WatchCampaignRequest req;
    req.set_name(name);
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    auto reader = v1::Orchestrator::NewStub(ch)->WatchCampaign(&ctx, req);
    v1::Event ev;
    int events = 0;
    while (reader->Read(&ev)) ++events;
    grpc::Status s = reader->Finish();
    if (!s.ok()) {
      EXPECT_EQ(events, 0) << "a refused watcher got events";
    }
    return s;
  }
  static grpc::Status ListHolders(std::shared_ptr<grpc::Channel> ch, const std::string& campaign,
                                  v1::ListHoldersResponse* out = nullptr) {
    v1::ListHoldersRequest req;
    req.set_campaign(campaign);
    v1::ListHoldersResponse ignored;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    return v1::Orchestrator::NewStub(ch)->ListHolders(&ctx, req, out ? out : &ignored);
  }
  static grpc::Status OrchListGpus(std::shared_ptr<grpc::Channel> ch) {
    v1::ListCampaignGpusResponse out;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    return v1::Orchestrator::NewStub(ch)->ListGpus(&ctx, {}, &out);
  }

  static grpc::Status GetInfo(std::shared_ptr<grpc::Channel> ch, v1::HolderInfo* out = nullptr) {
    v1::HolderInfo ignored;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    return v1::HolderAgent::NewStub(ch)->GetInfo(&ctx, {}, out ? out : &ignored);
  }
  static grpc::Status OpenChannel(std::shared_ptr<grpc::Channel> ch) {
    v1::OpenChannelRequest req;
    req.set_orchestrator_nonce(RandomString(32));
    v1::OpenChannelResponse out;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    grpc::Status s = v1::HolderAgent::NewStub(ch)->OpenChannel(&ctx, req, &out);
    if (!s.ok()) {
      EXPECT_TRUE(out.holder_public_key().empty());
      EXPECT_FALSE(out.has_evidence()) << "a refused caller got the holder's evidence";
    }
    return s;
  }
  static grpc::Status Provision(std::shared_ptr<grpc::Channel> ch) {
    v1::ProvisionRequest req;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    auto reader = v1::HolderAgent::NewStub(ch)->Provision(&ctx, req);
    v1::ProvisionUpdate u;
    int updates = 0;
    while (reader->Read(&u)) ++updates;
    grpc::Status s = reader->Finish();
    if (!s.ok()) {
      EXPECT_EQ(updates, 0) << "a refused caller got provisioning updates";
    }
    return s;
  }

  static grpc::Status MuxListGpus(std::shared_ptr<grpc::Channel> ch,
                                  v1::ListGpusResponse* out = nullptr) {
    v1::ListGpusResponse ignored;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    return v1::Mux::NewStub(ch)->ListGpus(&ctx, {}, out ? out : &ignored);
  }
  static grpc::Status MuxGetRoute(std::shared_ptr<grpc::Channel> ch) {
    v1::GetRouteRequest req;
    req.set_gpu("gpu0");
    v1::GpuRoute out;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    return v1::Mux::NewStub(ch)->GetRoute(&ctx, req, &out);
  }
  // A route the orchestrator would never ask for: to a holder's TD, with a
  // fencing token far ahead of any it uses.
  static grpc::Status MuxRoute(std::shared_ptr<grpc::Channel> ch) {
    v1::RouteRequest req;
    req.set_gpu("gpu0");
    req.set_domain("td-holder-a");
    req.set_fencing_token(1000000000);
    v1::RouteResponse out;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    return v1::Mux::NewStub(ch)->Route(&ctx, req, &out);
  }
  static grpc::Status MuxReset(std::shared_ptr<grpc::Channel> ch) {
    v1::ResetGpuRequest req;
    req.set_gpu("gpu0");
    req.set_fencing_token(1000000000);
    v1::ResetGpuResponse out;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    return v1::Mux::NewStub(ch)->Reset(&ctx, req, &out);
  }

  // A unary call to `method` (health, reflection) with an empty request.
  static grpc::Status GenericCall(std::shared_ptr<grpc::Channel> ch, const std::string& method) {
    grpc::GenericStub stub(ch);
    grpc::CompletionQueue cq;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    grpc::Slice empty("", 0);
    grpc::ByteBuffer request(&empty, 1);
    auto call = stub.PrepareUnaryCall(&ctx, method, request, &cq);
    call->StartCall();
    grpc::ByteBuffer response;
    grpc::Status status;
    call->Finish(&response, &status, reinterpret_cast<void*>(1));
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq.Next(&tag, &ok));
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    return status;
  }

  // Where the MUX says gpu0 is, asked with the orchestrator's certificate.
  static std::string Gpu0Route() {
    v1::ListGpusResponse list;
    grpc::Status s = MuxListGpus(As(kOrch, stack_->mux_endpoint(), kMux), &list);
    EXPECT_TRUE(s.ok()) << s.error_message();
    for (const auto& g : list.gpus()) {
      if (g.gpu() == "gpu0") return g.domain() + "#" + std::to_string(g.fencing_token());
    }
    return "";
  }

  static EmulatedStack* stack_;
  static TempDir* other_;
};

EmulatedStack* AuthorizationTest::stack_ = nullptr;
TempDir* AuthorizationTest::other_ = nullptr;

// CreateCampaign asks each holder who it is; when a holder cannot be
// reached, the operator learns that and no more. gRPC's connect error
// (no such socket, connection refused, a TLS failure) would tell which
// paths exist in the orchestrator's TD and which hosts and ports answer
// from it; the orchestrator's log keeps it.
TEST_F(AuthorizationTest, UnreachableHolderIsNamedWithoutTheConnectError) {
  auto ch = As(kOperator, stack_->orchestrator_endpoint(), kOrch);
  const std::string existing_file = "unix:" + stack_->dir() + "/orchestrator.json";
  for (const std::string& endpoint :
       {std::string("unix:/nonexistent/holder.sock"), existing_file,
        std::string("127.0.0.1:1"), stack_->mux_endpoint()}) {
    nlohmann::json spec = stack_->CampaignSpec();
    spec["holders"][0]["endpoint"] = endpoint;
    grpc::Status s = CreateCampaign(ch, "probe", nullptr, spec);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << endpoint << ": "
                                                             << s.error_message();
    EXPECT_EQ(s.error_message(),
              "holders[0]: holder 'holder-a' unreachable (the orchestrator's log says why)")
        << endpoint;
  }
  EXPECT_EQ(GetCampaign(ch, "probe").error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(AuthorizationTest, ClientsWithoutCertificateAreRefusedByEveryServer) {
  const std::string orch = stack_->orchestrator_endpoint();
  const std::string mux = stack_->mux_endpoint();
  const std::string holder = HolderEndpoint("holder-a");
  // TLS without a client certificate: the handshake fails.
  ExpectRefusedAtHandshake(ListCampaigns(NoClientCert(orch, kOrch)), "orchestrator, no cert");
  ExpectRefusedAtHandshake(CreateCampaign(NoClientCert(orch, kOrch), "anon"),
                           "orchestrator CreateCampaign, no cert");
  ExpectRefusedAtHandshake(GetInfo(NoClientCert(holder, kHolderA)), "holder, no cert");
  ExpectRefusedAtHandshake(OpenChannel(NoClientCert(holder, kHolderA)),
                           "holder OpenChannel, no cert");
  ExpectRefusedAtHandshake(MuxListGpus(NoClientCert(mux, kMux)), "mux, no cert");
  ExpectRefusedAtHandshake(MuxRoute(NoClientCert(mux, kMux)), "mux Route, no cert");
  // No TLS at all.
  ExpectRefusedAtHandshake(ListCampaigns(Plaintext(orch)), "orchestrator, plaintext");
  ExpectRefusedAtHandshake(GetInfo(Plaintext(holder)), "holder, plaintext");
  ExpectRefusedAtHandshake(Provision(Plaintext(holder)), "holder Provision, plaintext");
  ExpectRefusedAtHandshake(MuxRoute(Plaintext(mux)), "mux Route, plaintext");
  EXPECT_EQ(Gpu0Route().rfind("td-holder-a", 0), std::string::npos) << "nothing was routed";
}

TEST_F(AuthorizationTest, CertificatesFromAnotherCaAreRefusedByEveryServer) {
  // Same role and name as this campaign's identities, wrong CA.
  ExpectRefusedAtHandshake(
      ListCampaigns(FromOtherCa(kOperator, stack_->orchestrator_endpoint(), kOrch)),
      "orchestrator, other CA operator");
  ExpectRefusedAtHandshake(
      GetInfo(FromOtherCa(kOrch, HolderEndpoint("holder-a"), kHolderA)),
      "holder-a, other CA orchestrator");
  ExpectRefusedAtHandshake(
      OpenChannel(FromOtherCa(kOrch, HolderEndpoint("holder-b"), kHolderB)),
      "holder-b OpenChannel, other CA orchestrator");
  ExpectRefusedAtHandshake(MuxRoute(FromOtherCa(kOrch, stack_->mux_endpoint(), kMux)),
                           "mux Route, other CA orchestrator");
  ExpectRefusedAtHandshake(MuxListGpus(FromOtherCa(kOperator, stack_->mux_endpoint(), kMux)),
                           "mux ListGpus, other CA operator");
  // The client side refuses the mixture before dialing.
  TlsFiles mixed = TestFiles(OtherPki(), kOrch);
  mixed.ca = CaCertPath(stack_->tls_dir());
  EXPECT_FALSE(MakeSecureChannel(stack_->mux_endpoint(), mixed, kMux).ok());
}

TEST_F(AuthorizationTest, OperatorsCannotObtainKeysOrData) {
  for (const std::string& h : stack_->holder_names()) {
    auto ch = As(kOperator, HolderEndpoint(h), Identity{kRoleHolder, h});
    ExpectDenied(OpenChannel(ch), kOperator, kOnlyOrchestrator, h + " OpenChannel");
    ExpectDenied(Provision(ch), kOperator, kOnlyOrchestrator, h + " Provision");
    ExpectDenied(GetInfo(ch), kOperator, kOnlyOrchestrator, h + " GetInfo");
  }
  const std::string before = Gpu0Route();
  auto mux = As(kOperator, stack_->mux_endpoint(), kMux);
  ExpectDenied(MuxRoute(mux), kOperator, kOnlyOrchestrator, "mux Route");
  ExpectDenied(MuxReset(mux), kOperator, kOnlyOrchestrator, "mux Reset");
  EXPECT_EQ(Gpu0Route(), before) << "a refused Route/Reset moved the GPU";
  // Reading the routing table is allowed.
  v1::ListGpusResponse list;
  grpc::Status s = MuxListGpus(mux, &list);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(list.gpus_size(), 1);
  EXPECT_EQ(list.gpus(0).gpu(), "gpu0");
  s = MuxGetRoute(mux);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

// P8 against the real MUX daemon: the campaign CA's key (the tenant's) mints
// orchestrator certificates the MUX does not obey; only the pinned one is.
TEST_F(AuthorizationTest, MuxObeysOnlyPinnedCallers) {
  const std::string before = Gpu0Route();
  auto rogue = As(kUnpinnedOrch, stack_->mux_endpoint(), kMux);
  for (const grpc::Status& s : {MuxRoute(rogue), MuxReset(rogue), MuxListGpus(rogue)}) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
    EXPECT_NE(s.error_message().find("not one the host's administrator pinned"),
              std::string::npos)
        << s.error_message();
  }
  EXPECT_EQ(Gpu0Route(), before) << "an unpinned orchestrator moved the GPU";
}

// A holder agent answers only the orchestrator identities its configuration
// names ("orchestrator_names"): another orchestrator certificate of the same
// campaign CA is refused before any method runs, so it learns neither the
// dataset (GetInfo) nor gets the holder's evidence (OpenChannel).
TEST_F(AuthorizationTest, HoldersAnswerOnlyTheOrchestratorsTheyName) {
  for (const std::string& holder : {"holder-a", "holder-b"}) {
    const Identity server{kRoleHolder, holder};
    auto rogue = As(kUnpinnedOrch, HolderEndpoint(holder), server);
    v1::HolderInfo info;
    for (const grpc::Status& s : {GetInfo(rogue, &info), OpenChannel(rogue), Provision(rogue)}) {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
      EXPECT_NE(s.error_message().find(
                    "orchestrator 'second-orchestrator' is not named in this server's "
                    "configuration"),
                std::string::npos)
          << s.error_message();
    }
    EXPECT_TRUE(info.dataset_name().empty());
    // The named one is answered.
    grpc::Status s = GetInfo(As(kOrch, HolderEndpoint(holder), server), &info);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(info.name(), holder);
  }
}

// Health and reflection are served only by the orchestrator, and only to the
// roles that operate it (operators, schedulers); the holder agents and the
// MUX serve neither.
TEST_F(AuthorizationTest, HealthAndReflectionOnlyForOperatorsAndSchedulersAtTheOrchestrator) {
  const std::string health = "/grpc.health.v1.Health/Check";
  const std::vector<std::string> reflection = {
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"};
  const std::string orch = stack_->orchestrator_endpoint();
  EXPECT_TRUE(GenericCall(As(kOperator, orch, kOrch), health).ok());
  EXPECT_TRUE(GenericCall(As(kScheduler, orch, kOrch), health).ok());
  for (const Identity& who : {kHolderA, kTrainer, kMux, kOrch}) {
    for (const std::string& method : {health, reflection[0], reflection[1]}) {
      ExpectDenied(GenericCall(As(who, orch, kOrch), method), who, kControlRoles,
                   DescribeIdentity(who) + " " + method);
    }
  }
  // Not served at all by a holder agent or the MUX, even to their callers.
  for (const auto& [endpoint, server] :
       {std::pair<std::string, Identity>{HolderEndpoint("holder-a"), kHolderA},
        {stack_->mux_endpoint(), kMux}}) {
    for (const std::string& method : {health, reflection[0], reflection[1]}) {
      grpc::Status s = GenericCall(As(kOrch, endpoint, server), method);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED)
          << DescribeIdentity(server) << " " << method << ": " << s.error_message();
    }
  }
}

// The pinned orchestrator itself cannot reach a domain the MUX's
// configuration does not list, nor send a request larger than the MUX's API
// needs: the server refuses it before it is parsed.
TEST_F(AuthorizationTest, MuxRefusesUnconfiguredDomainsAndOversizedRequests) {
  const std::string before = Gpu0Route();
  auto orch = As(kOrch, stack_->mux_endpoint(), kMux);
  v1::RouteRequest req;
  req.set_gpu("gpu0");
  req.set_domain("other-tenant-vm");
  req.set_fencing_token(1000000000);
  v1::RouteResponse out;
  {
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    grpc::Status s = v1::Mux::NewStub(orch)->Route(&ctx, req, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  }
  req.set_domain(std::string(1 << 20, 'a'));
  {
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    grpc::Status s = v1::Mux::NewStub(orch)->Route(&ctx, req, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  }
  EXPECT_EQ(Gpu0Route(), before);
  // Neither left a line in the MUX's journal.
  auto journal = ReadFile(stack_->dir() + "/logs/mux-audit.jsonl");
  ASSERT_TRUE(journal.ok()) << journal.status();
  EXPECT_EQ(journal->find("other-tenant-vm"), std::string::npos);
  EXPECT_EQ(journal->find("aaaaaaaa"), std::string::npos);
}

TEST_F(AuthorizationTest, SchedulersAndOperatorsCreateAndListCampaigns) {
  auto sched = As(kScheduler, stack_->orchestrator_endpoint(), kOrch);
  auto op = As(kOperator, stack_->orchestrator_endpoint(), kOrch);
  v1::CreateCampaignResponse created;
  grpc::Status s = CreateCampaign(sched, "by-scheduler", &created);
  ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  EXPECT_TRUE(created.created());
  EXPECT_EQ(created.campaign().name(), "by-scheduler");
  EXPECT_EQ(created.campaign().state(), v1::CREATED);
  s = CreateCampaign(op, "by-operator", &created);
  ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  EXPECT_TRUE(created.created());

  for (const auto& who : {sched, op}) {
    v1::ListCampaignsResponse list;
    s = ListCampaigns(who, &list);
    ASSERT_TRUE(s.ok()) << s.error_message();
    std::set<std::string> names;
    for (const auto& c : list.campaigns()) names.insert(c.name());
    EXPECT_TRUE(names.count("by-scheduler")) << "ListCampaigns misses by-scheduler";
    EXPECT_TRUE(names.count("by-operator")) << "ListCampaigns misses by-operator";
    v1::Campaign c;
    s = GetCampaign(who, "by-scheduler", &c);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(c.holders_size(), 2);
    v1::ListHoldersResponse holders;
    s = ListHolders(who, "by-operator", &holders);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(holders.holders_size(), 2) << "operators and schedulers see every holder";
    EXPECT_TRUE(OrchListGpus(who).ok());
  }
}

TEST_F(AuthorizationTest, HolderActsOnlyAsItself) {
  auto op = As(kOperator, stack_->orchestrator_endpoint(), kOrch);
  grpc::Status s = CreateCampaign(op, "holder-view");
  ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();

  auto a = As(kHolderA, stack_->orchestrator_endpoint(), kOrch);
  ExpectDenied(CreateCampaign(a, "by-holder-a"), kHolderA, kControlRoles, "CreateCampaign");
  ExpectDenied(GetCampaign(a, "holder-view"), kHolderA, kControlRoles, "GetCampaign");
  ExpectDenied(ListCampaigns(a), kHolderA, kControlRoles, "ListCampaigns");
  ExpectDenied(WatchCampaign(a, "holder-view"), kHolderA, kControlRoles, "WatchCampaign");
  ExpectDenied(OrchListGpus(a), kHolderA, kControlRoles, "ListGpus");
  for (Control c : {Control::kStart, Control::kPause, Control::kResume, Control::kCancel}) {
    ExpectDenied(ControlCampaign(a, c, "holder-view"), kHolderA, kControlRoles,
                 "control " + std::to_string(static_cast<int>(c)));
  }
  v1::Campaign after;
  s = GetCampaign(op, "holder-view", &after);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(after.state(), v1::CREATED) << "refused control calls changed the campaign";
  v1::ListCampaignsResponse all;
  ASSERT_TRUE(ListCampaigns(op, &all).ok());
  for (const auto& c : all.campaigns()) EXPECT_NE(c.name(), "by-holder-a");

  // ListHolders: only its own rows, for one campaign and for all of them.
  v1::ListHoldersResponse mine;
  s = ListHolders(a, "holder-view", &mine);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(mine.holders_size(), 1);
  EXPECT_EQ(mine.holders(0).name(), "holder-a");
  EXPECT_EQ(mine.holders(0).campaign(), "holder-view");
  mine.Clear();
  s = ListHolders(a, "", &mine);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_GE(mine.holders_size(), 1);
  for (const auto& h : mine.holders()) EXPECT_EQ(h.name(), "holder-a") << h.campaign();
  v1::ListHoldersResponse theirs;
  s = ListHolders(As(kHolderB, stack_->orchestrator_endpoint(), kOrch), "holder-view", &theirs);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(theirs.holders_size(), 1);
  EXPECT_EQ(theirs.holders(0).name(), "holder-b");

  // Holder agents answer only the orchestrator: not another holder, nor itself.
  auto b_agent = As(kHolderA, HolderEndpoint("holder-b"), kHolderB);
  ExpectDenied(GetInfo(b_agent), kHolderA, kOnlyOrchestrator, "holder-b GetInfo");
  ExpectDenied(OpenChannel(b_agent), kHolderA, kOnlyOrchestrator, "holder-b OpenChannel");
  ExpectDenied(Provision(b_agent), kHolderA, kOnlyOrchestrator, "holder-b Provision");
  ExpectDenied(GetInfo(As(kHolderA, HolderEndpoint("holder-a"), kHolderA)), kHolderA,
               kOnlyOrchestrator, "holder-a GetInfo to itself");

  // The MUX: a holder cannot route the GPU (to itself or anywhere).
  const std::string before = Gpu0Route();
  auto mux = As(kHolderA, stack_->mux_endpoint(), kMux);
  ExpectDenied(MuxRoute(mux), kHolderA, kOnlyOrchestrator, "mux Route");
  ExpectDenied(MuxReset(mux), kHolderA, kOnlyOrchestrator, "mux Reset");
  ExpectDenied(MuxListGpus(mux), kHolderA, "allowed roles: orchestrator, operator",
               "mux ListGpus");
  EXPECT_EQ(Gpu0Route(), before);
}

TEST_F(AuthorizationTest, TrainerRoleIsDeniedEverywhere) {
  auto orch = As(kTrainer, stack_->orchestrator_endpoint(), kOrch);
  ExpectDenied(CreateCampaign(orch, "by-trainer"), kTrainer, kControlRoles, "CreateCampaign");
  ExpectDenied(ListCampaigns(orch), kTrainer, kControlRoles, "ListCampaigns");
  ExpectDenied(GetCampaign(orch, "demo"), kTrainer, kControlRoles, "GetCampaign");
  ExpectDenied(ControlCampaign(orch, Control::kStart, "demo"), kTrainer, kControlRoles,
               "StartCampaign");
  ExpectDenied(WatchCampaign(orch, "demo"), kTrainer, kControlRoles, "WatchCampaign");
  ExpectDenied(OrchListGpus(orch), kTrainer, kControlRoles, "ListGpus");
  ExpectDenied(ListHolders(orch, ""), kTrainer, "allowed roles: operator, scheduler, holder",
               "ListHolders");
  for (const std::string& h : stack_->holder_names()) {
    auto ch = As(kTrainer, HolderEndpoint(h), Identity{kRoleHolder, h});
    ExpectDenied(GetInfo(ch), kTrainer, kOnlyOrchestrator, h + " GetInfo");
    ExpectDenied(OpenChannel(ch), kTrainer, kOnlyOrchestrator, h + " OpenChannel");
    ExpectDenied(Provision(ch), kTrainer, kOnlyOrchestrator, h + " Provision");
  }
  const std::string before = Gpu0Route();
  ExpectDenied(MuxRoute(As(kTrainer, stack_->mux_endpoint(), kMux)), kTrainer,
               kOnlyOrchestrator, "mux Route");
  EXPECT_EQ(Gpu0Route(), before);
}

// Taking a holder's data out of a campaign is an operator's decision: a
// scheduler, a holder (even the one concerned) and a trainer are refused
// before the engine is asked; an operator's call reaches it, which checks
// the reason and the campaign's state.
TEST_F(AuthorizationTest, OnlyOperatorsSkipHolders) {
  auto op = As(kOperator, stack_->orchestrator_endpoint(), kOrch);
  grpc::Status s = CreateCampaign(op, "skip-view");
  ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  auto skip = [](std::shared_ptr<grpc::Channel> ch, const std::string& reason) {
    v1::SkipHolderRequest req;
    req.set_campaign("skip-view");
    req.set_holder("holder-a");
    req.set_reason(reason);
    v1::Campaign out;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    return v1::Orchestrator::NewStub(ch)->SkipHolder(&ctx, req, &out);
  };
  const std::string only_operator = "allowed roles: operator";
  ExpectDenied(skip(As(kScheduler, stack_->orchestrator_endpoint(), kOrch), "gone"), kScheduler,
               only_operator, "scheduler SkipHolder");
  ExpectDenied(skip(As(kHolderA, stack_->orchestrator_endpoint(), kOrch), "gone"), kHolderA,
               only_operator, "holder-a SkipHolder");
  ExpectDenied(skip(As(kTrainer, stack_->orchestrator_endpoint(), kOrch), "gone"), kTrainer,
               only_operator, "trainer SkipHolder");
  s = skip(op, "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  s = skip(op, "its TD is gone for good");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("only while the campaign is paused"), std::string::npos)
      << s.error_message();
  v1::Campaign after;
  ASSERT_TRUE(GetCampaign(op, "skip-view", &after).ok());
  for (const auto& h : after.holders()) EXPECT_EQ(h.state(), "active") << h.name();
}

// A daemon runs as the identity in its certificate: one configured with
// another identity's certificate (and its matching key) refuses to start,
// exit status 2, naming both, before it serves or, for the MUX, touches a GPU
// or its journal.
TEST_F(AuthorizationTest, DaemonsRefuseToStartWithAnotherIdentitysCertificate) {
  auto bin_dir = FindDaemonDir("");
  ASSERT_TRUE(bin_dir.ok()) << bin_dir.status();
  TempDir t;
  // Runs the daemon until it exits (20 s at most); its exit status and log.
  auto run = [&](const std::string& daemon, const nlohmann::json& config, int n,
                 std::string* log) {
    const std::string cfg = t.path() + "/" + std::to_string(n) + ".json";
    const std::string log_path = t.path() + "/" + std::to_string(n) + ".log";
    EXPECT_TRUE(WriteFile(cfg, config.dump(), 0600).ok());
    Subprocess p;
    EXPECT_TRUE(p.Start({*bin_dir + "/" + daemon, "--config=" + cfg}, log_path).ok());
    for (int i = 0; i < 2000 && p.Running(); ++i) usleep(10000);
    if (p.Running()) p.Terminate(1000);
    auto text = ReadFile(log_path);
    *log = text.ok() ? *text : "";
    return p.exit_status();
  };
  auto tls_json = [&](const Identity& id) {
    TlsFiles f = stack_->tls(id);
    return nlohmann::json{{"ca", f.ca}, {"cert", f.cert}, {"key", f.key}};
  };
  int n = 0;

  // holder-a's agent, on a socket of its own, with another identity's files.
  auto holder = ReadJsonFile(stack_->dir() + "/holder-a.json");
  ASSERT_TRUE(holder.ok()) << holder.status();
  (*holder)["listen"] = "unix:" + t.path() + "/holder.sock";
  for (const Identity& wrong : {kHolderB, kMux, kOrch}) {
    (*holder)["tls"] = tls_json(wrong);
    std::string log;
    const int st = run("holder_agent/holder_agent", *holder, ++n, &log);
    ASSERT_TRUE(WIFEXITED(st)) << DescribeIdentity(wrong) << ": status " << st << "\n" << log;
    EXPECT_EQ(WEXITSTATUS(st), 2) << log;
    EXPECT_NE(log.find("tls.cert is for " + DescribeIdentity(wrong) +
                       ", this agent is holder 'holder-a'"),
              std::string::npos)
        << log;
    EXPECT_NE(access((t.path() + "/holder.sock").c_str(), F_OK), 0);
  }

  // A MUX with its own state and journal, with another identity's files:
  // refused before it opens either.
  auto mux = ReadJsonFile(stack_->dir() + "/mux.json");
  ASSERT_TRUE(mux.ok()) << mux.status();
  (*mux)["listen"] = "unix:" + t.path() + "/mux.sock";
  (*mux)["state_file"] = t.path() + "/routes.json";
  (*mux)["audit_log"] = t.path() + "/audit.jsonl";
  for (const Identity& wrong : {kOrch, kHolderA}) {
    (*mux)["tls"] = tls_json(wrong);
    std::string log;
    const int st = run("vfio_mux/vfio_mux", *mux, ++n, &log);
    ASSERT_TRUE(WIFEXITED(st)) << DescribeIdentity(wrong) << ": status " << st << "\n" << log;
    EXPECT_EQ(WEXITSTATUS(st), 2) << log;
    EXPECT_NE(log.find("tls.cert is for " + DescribeIdentity(wrong) +
                       "; the MUX needs a certificate of role mux"),
              std::string::npos)
        << log;
    for (const char* f : {"/mux.sock", "/routes.json", "/audit.jsonl"}) {
      EXPECT_NE(access((t.path() + f).c_str(), F_OK), 0) << f;
    }
  }

  // The same holder configuration with its own certificate starts: the
  // refusals above were about the certificate alone.
  (*holder)["tls"] = tls_json(kHolderA);
  // With a ring directory of its own: the stack's holder-a holds its own.
  (*holder)["bounce_dir"] = t.path();
  (*holder)["state_dir"] = t.path() + "/state";
  const std::string cfg = t.path() + "/right.json";
  ASSERT_TRUE(WriteFile(cfg, holder->dump(), 0600).ok());
  Subprocess p;
  ASSERT_TRUE(p.Start({*bin_dir + "/holder_agent/holder_agent", "--config=" + cfg,
                       "--ready_file=" + t.path() + "/ready"},
                      t.path() + "/right.log")
                  .ok());
  EXPECT_TRUE(WaitForFile(t.path() + "/ready", &p, "holder_agent", 20000).ok())
      << ReadFile(t.path() + "/right.log").value_or("");
  p.Terminate();
}

// The emulated GPU reaches a domain's shared memory only: its daemon refuses
// to start with a shared-memory directory that is missing or a symbolic
// link, or that two domains share, and says which; the stack's own
// configuration gives every holder domain a directory of its own.
TEST_F(AuthorizationTest, GpuDaemonRefusesSharedMemoryThatIsNotEachDomainsOwn) {
  auto bin_dir = FindDaemonDir("");
  ASSERT_TRUE(bin_dir.ok()) << bin_dir.status();
  TempDir t;
  auto dev = ReadJsonFile(stack_->dir() + "/device.json");
  ASSERT_TRUE(dev.ok()) << dev.status();
  const auto& dirs = (*dev)["shared_dirs"];
  ASSERT_EQ(dirs.size(), stack_->holder_names().size());
  for (const auto& h : stack_->holder_names()) {
    EXPECT_EQ(dirs.value("td-" + h, ""), stack_->shared_dir("td-" + h)) << h;
  }
  (*dev)["socket_dir"] = t.path();
  (*dev)["admin_socket"] = t.path() + "/admin.sock";
  ASSERT_EQ(::mkdir((t.path() + "/a").c_str(), 0700), 0);
  ASSERT_EQ(::symlink((t.path() + "/a").c_str(), (t.path() + "/link").c_str()), 0);
  struct Case {
    nlohmann::json shared_dirs;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{{"td-holder-a", t.path() + "/a"}, {"td-holder-b", t.path() + "/a/"}},
       "both name " + t.path() + "/a"},
      {{{"td-holder-a", t.path() + "/link"}}, "not a symbolic link"},
      {{{"td-holder-a", t.path() + "/missing"}}, "must be an existing directory"},
      {{{"td-nobody", t.path() + "/a"}}, "must name a domain listed in 'domains'"},
      {{{"td-holder-a", "relative"}}, "an absolute directory"},
  };
  int n = 0;
  for (const Case& c : cases) {
    (*dev)["shared_dirs"] = c.shared_dirs;
    const std::string cfg = t.path() + "/dev" + std::to_string(++n) + ".json";
    const std::string log_path = cfg + ".log";
    ASSERT_TRUE(WriteFile(cfg, dev->dump(), 0600).ok());
    Subprocess p;
    ASSERT_TRUE(p.Start({*bin_dir + "/device/emulated_gpu_daemon", "--config=" + cfg},
                        log_path)
                    .ok());
    for (int i = 0; i < 2000 && p.Running(); ++i) usleep(10000);
    if (p.Running()) p.Terminate(1000);
    const int st = p.exit_status();
    const std::string log = ReadFile(log_path).value_or("");
    ASSERT_TRUE(WIFEXITED(st)) << c.shared_dirs.dump() << ": status " << st << "\n" << log;
    EXPECT_EQ(WEXITSTATUS(st), 2) << log;
    EXPECT_NE(log.find(c.says), std::string::npos) << c.shared_dirs.dump() << "\n" << log;
    EXPECT_NE(access((t.path() + "/admin.sock").c_str(), F_OK), 0) << "it served";
  }
  // A misspelt optional field is refused, not taken as its default.
  (*dev)["shared_dirs"] = {{"td-holder-a", t.path() + "/a"}};
  (*dev)["heartbeat_seconds"] = 4;
  const std::string cfg = t.path() + "/dev-unknown.json";
  ASSERT_TRUE(WriteFile(cfg, dev->dump(), 0600).ok());
  Subprocess p;
  ASSERT_TRUE(p.Start({*bin_dir + "/device/emulated_gpu_daemon", "--config=" + cfg},
                      cfg + ".log")
                  .ok());
  for (int i = 0; i < 2000 && p.Running(); ++i) usleep(10000);
  if (p.Running()) p.Terminate(1000);
  const std::string log = ReadFile(cfg + ".log").value_or("");
  ASSERT_TRUE(WIFEXITED(p.exit_status())) << log;
  EXPECT_EQ(WEXITSTATUS(p.exit_status()), 2) << log;
  EXPECT_NE(log.find("unknown field 'heartbeat_seconds'"), std::string::npos) << log;
}

// The host holds the MUX's key: with it, it gets neither the holders' keys
// nor campaign control.
TEST_F(AuthorizationTest, MuxCertificateReachesNeitherHoldersNorControl) {
  for (const std::string& h : stack_->holder_names()) {
    auto ch = As(kMux, HolderEndpoint(h), Identity{kRoleHolder, h});
    ExpectDenied(GetInfo(ch), kMux, kOnlyOrchestrator, h + " GetInfo");
    ExpectDenied(OpenChannel(ch), kMux, kOnlyOrchestrator, h + " OpenChannel");
    ExpectDenied(Provision(ch), kMux, kOnlyOrchestrator, h + " Provision");
  }
  auto orch = As(kMux, stack_->orchestrator_endpoint(), kOrch);
  ExpectDenied(ListCampaigns(orch), kMux, kControlRoles, "ListCampaigns");
  ExpectDenied(CreateCampaign(orch, "by-mux"), kMux, kControlRoles, "CreateCampaign");
  ExpectDenied(ListHolders(orch, ""), kMux, "allowed roles: operator, scheduler, holder",
               "ListHolders");
  // Nor is the orchestrator's own certificate a control credential.
  ExpectDenied(ListCampaigns(As(kOrch, stack_->orchestrator_endpoint(), kOrch)), kOrch,
               kControlRoles, "ListCampaigns as orchestrator");
}

TEST_F(AuthorizationTest, ServersCannotImpersonateEachOther) {
  // The orchestrator's certificate, expecting holder-a, dialing holder-b.
  ExpectRefusedAtHandshake(GetInfo(As(kOrch, HolderEndpoint("holder-b"), kHolderA)),
                           "holder-b posing as holder-a");
  ExpectRefusedAtHandshake(OpenChannel(As(kOrch, HolderEndpoint("holder-a"), kHolderB)),
                           "holder-a posing as holder-b");
  // Expecting the MUX at a holder's endpoint, and a holder at the MUX's.
  ExpectRefusedAtHandshake(MuxListGpus(As(kOrch, HolderEndpoint("holder-a"), kMux)),
                           "holder-a posing as the MUX");
  ExpectRefusedAtHandshake(GetInfo(As(kOrch, stack_->mux_endpoint(), kHolderA)),
                           "the MUX posing as holder-a");
  // Expecting the orchestrator at the MUX's endpoint.
  ExpectRefusedAtHandshake(ListCampaigns(As(kOperator, stack_->mux_endpoint(), kOrch)),
                           "the MUX posing as the orchestrator");

  // The orchestrator itself: a campaign whose holder-a points at holder-b's
  // agent is refused, naming holder-a (why, a TLS failure, stays in the
  // orchestrator's log), and is not created.
  nlohmann::json spec = stack_->CampaignSpec();
  ASSERT_EQ(spec["holders"][0]["name"], "holder-a");
  spec["holders"][0]["endpoint"] = HolderEndpoint("holder-b");
  spec["holders"].erase(1);
  auto op = As(kOperator, stack_->orchestrator_endpoint(), kOrch);
  grpc::Status s = CreateCampaign(op, "swapped-endpoint", nullptr, spec);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_EQ(s.error_message(),
            "holders[0]: holder 'holder-a' unreachable (the orchestrator's log says why)");
  EXPECT_EQ(GetCampaign(op, "swapped-endpoint").error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(AuthorizationTest, OrchestratorCertificateIsAcceptedByHoldersAndMux) {
  for (const std::string& h : stack_->holder_names()) {
    v1::HolderInfo info;
    grpc::Status s = GetInfo(As(kOrch, HolderEndpoint(h), Identity{kRoleHolder, h}), &info);
    ASSERT_TRUE(s.ok()) << h << ": " << s.error_message();
    EXPECT_EQ(info.name(), h);
    EXPECT_EQ(info.domain(), "td-" + h);
    EXPECT_GT(info.dataset_bytes(), 0u);
  }
  v1::ListGpusResponse list;
  grpc::Status s = MuxListGpus(As(kOrch, stack_->mux_endpoint(), kMux), &list);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(list.gpus_size(), 1);
  EXPECT_EQ(list.gpus(0).gpu(), "gpu0");
  EXPECT_EQ(list.gpus(0).backend(), "emulated");
}

// Deleting a campaign's record is an operator's decision too; a deleted
// campaign's name can be used again, and trip ids go on from where they were.
TEST_F(AuthorizationTest, OnlyOperatorsDeleteFinalCampaignsAndTheNameIsFreeAgain) {
  auto op = As(kOperator, stack_->orchestrator_endpoint(), kOrch);
  grpc::Status s = CreateCampaign(op, "delete-me");
  ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  auto del = [](std::shared_ptr<grpc::Channel> ch, const std::string& name) {
    v1::CampaignRef req;
    req.set_name(name);
    v1::DeleteCampaignResponse out;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    return v1::Orchestrator::NewStub(ch)->DeleteCampaign(&ctx, req, &out);
  };
  const std::string only_operator = "allowed roles: operator";
  ExpectDenied(del(As(kScheduler, stack_->orchestrator_endpoint(), kOrch), "delete-me"),
               kScheduler, only_operator, "scheduler DeleteCampaign");
  ExpectDenied(del(As(kHolderA, stack_->orchestrator_endpoint(), kOrch), "delete-me"), kHolderA,
               only_operator, "holder-a DeleteCampaign");
  s = del(op, "delete-me");  // CREATED is not final
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("cancel it first"), std::string::npos) << s.error_message();
  EXPECT_EQ(del(op, "no-such").error_code(), grpc::StatusCode::NOT_FOUND);
  {
    v1::CampaignRef ref;
    ref.set_name("delete-me");
    v1::Campaign out;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    ASSERT_TRUE(v1::Orchestrator::NewStub(op)->CancelCampaign(&ctx, ref, &out).ok());
  }
  s = del(op, "delete-me");
  ASSERT_TRUE(s.ok()) << s.error_message();
  v1::Campaign gone;
  EXPECT_EQ(GetCampaign(op, "delete-me", &gone).error_code(), grpc::StatusCode::NOT_FOUND);
  // The name is free again (a new request id: the old one went with it too).
  s = CreateCampaign(op, "delete-me");
  EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
}

}  // namespace
}  // namespace gputravel
