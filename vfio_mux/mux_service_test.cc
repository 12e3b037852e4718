#include "vfio_mux/mux_service.h"

#include <chrono>
#include <map>
#include <string>

#include "auth/identity.h"
#include "auth/pki.h"
#include "auth/test_server.h"
#include "auth/tls_config.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "metrics/metrics_registry.h"
#include "metrics/metrics_scrape.h"
#include "util/files.h"
#include "util/grpc_status.h"

namespace gputravel {
namespace {

const Identity kMux{kRoleMux, "mux"};
const Identity kOrch{kRoleOrchestrator, "orchestrator"};
const Identity kOperator{kRoleOperator, "operator"};
// An orchestrator certificate of the same campaign CA that the host's
// administrator did not pin: what the tenant, who holds that CA's key, can mint.
const Identity kRogue{kRoleOrchestrator, "rogue"};

class CountingBackend : public RoutingBackend {
 public:
  std::string Name() const override { return "counting"; }
  absl::StatusOr<std::vector<GpuDevice>> ListGpus() override {
    return std::vector<GpuDevice>{{"gpu0", "", "", ""}, {"gpu1", "", "", ""}};
  }
  absl::Status Move(const std::string&, const std::string&, const std::string&) override {
    ++moves;
    return fail;
  }
  absl::Status Reset(const std::string&) override {
    ++resets;
    return fail;
  }
  int moves = 0, resets = 0;
  absl::Status fail;  // what Move and Reset return
};

// The Mux API over real gRPC (mutual TLS) on a Unix socket.
class MuxServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    dir_ = tmp_.path();
    ASSERT_TRUE(MakeTestPki(Pki(), {kMux, kOrch, kOperator, kRogue}).ok());
    RouteTableOptions o;
    o.domains = {"td-a", "td-b"};
    table_ = *RouteTable::Open(&backend_, dir_ + "/state.json", dir_ + "/audit.log", o);
    auto callers = MuxCallers::FromPems(
        {*ReadFile(TestFiles(Pki(), kOrch).cert), *ReadFile(TestFiles(Pki(), kOperator).cert)},
        "test callers");
    ASSERT_TRUE(callers.ok()) << callers.status();
    service_ = std::make_unique<MuxService>(table_.get(), backend_.Name(), *callers, &metrics_);
    auto creds = MakeServerCredentials(TestFiles(Pki(), kMux));
    ASSERT_TRUE(creds.ok()) << creds.status();
    grpc::ServerBuilder b;
    b.AddListeningPort(Endpoint(), *creds);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_);
    stub_ = StubAs(kOrch);
    ASSERT_TRUE(stub_);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }
  std::string Pki() const { return dir_ + "/pki"; }
  std::string Endpoint() const { return "unix:" + dir_ + "/mux.sock"; }
  std::unique_ptr<v1::Mux::Stub> StubAs(const Identity& id) {
    auto ch = MakeSecureChannel(Endpoint(), TestFiles(Pki(), id), kMux);
    EXPECT_TRUE(ch.ok()) << ch.status();
    return ch.ok() ? v1::Mux::NewStub(*ch) : nullptr;
  }
  static void Deadline(grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  }
  grpc::Status Route(const std::string& gpu, const std::string& domain, uint64_t token,
                     v1::Mux::Stub* stub = nullptr) {
    v1::RouteRequest r;
    r.set_gpu(gpu);
    r.set_domain(domain);
    r.set_fencing_token(token);
    v1::RouteResponse resp;
    grpc::ClientContext ctx;
    Deadline(&ctx);
    return (stub != nullptr ? stub : stub_.get())->Route(&ctx, r, &resp);
  }
  grpc::Status ListGpus(v1::Mux::Stub* stub, v1::ListGpusResponse* out) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    return stub->ListGpus(&ctx, {}, out);
  }
  // What the service counts in (its scrape: registry_.Text()).
  std::map<std::string, double> Scrape() {
    auto s = ParseMetricsText(registry_.Text());
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : std::map<std::string, double>{};
  }
  MetricsRegistry registry_;
  MuxMetrics metrics_{&registry_};
  TempDir tmp_;
  std::string dir_;
  CountingBackend backend_;
  std::unique_ptr<RouteTable> table_;
  std::unique_ptr<MuxService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Mux::Stub> stub_;  // the orchestrator's
};

TEST_F(MuxServiceTest, ListRouteGetReset) {
  v1::ListGpusResponse list;
  {
    grpc::Status s = ListGpus(stub_.get(), &list);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_EQ(list.gpus_size(), 2);
  EXPECT_EQ(list.gpus(0).backend(), "counting");
  ASSERT_TRUE(Route("gpu1", "td-a", 3).ok());
  v1::GetRouteRequest g;
  g.set_gpu("gpu1");
  v1::GpuRoute route;
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    ASSERT_TRUE(stub_->GetRoute(&ctx, g, &route).ok());
  }
  EXPECT_EQ(route.domain(), "td-a");
  EXPECT_EQ(route.fencing_token(), 3u);
  v1::ResetGpuRequest rr;
  rr.set_gpu("gpu1");
  rr.set_fencing_token(3);
  v1::ResetGpuResponse rresp;
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    ASSERT_TRUE(stub_->Reset(&ctx, rr, &rresp).ok());
  }
  EXPECT_EQ(backend_.resets, 1);
}

// Every route and reset answered is counted by outcome, fencing refusals
// apart; nothing names a GPU, a domain or a token.
TEST_F(MuxServiceTest, MetricsCountRoutesResetsAndFencingRefusals) {
  ASSERT_TRUE(Route("gpu0", "td-a", 5).ok());
  ASSERT_TRUE(Route("gpu0", "", 5).ok());
  EXPECT_FALSE(Route("gpu0", "td-b", 4).ok());          // stale token
  EXPECT_FALSE(Route("gpu0", "td-unlisted", 6).ok());   // not configured
  backend_.fail = absl::InternalError("vfio-pci unbind: EBUSY");
  EXPECT_FALSE(Route("gpu0", "td-b", 6).ok());          // the host's side
  backend_.fail = absl::OkStatus();
  v1::ResetGpuRequest rr;
  rr.set_gpu("gpu0");
  rr.set_fencing_token(3);  // stale
  v1::ResetGpuResponse rresp;
  grpc::ClientContext ctx;
  Deadline(&ctx);
  EXPECT_FALSE(stub_->Reset(&ctx, rr, &rresp).ok());
  // A caller the MUX does not know is refused before the table: not counted.
  auto op = StubAs(kOperator);
  EXPECT_FALSE(Route("gpu0", "td-a", 9, op.get()).ok());

  auto m = Scrape();
  EXPECT_EQ(m.at("gputravel_mux_routes_total{outcome=\"ok\"}"), 2);
  EXPECT_EQ(m.at("gputravel_mux_routes_total{outcome=\"refused\"}"), 2);
  EXPECT_EQ(m.at("gputravel_mux_routes_total{outcome=\"failed\"}"), 1);
  EXPECT_EQ(m.at("gputravel_mux_fencing_refusals_total{action=\"route\"}"), 1);
  EXPECT_EQ(m.at("gputravel_mux_fencing_refusals_total{action=\"reset\"}"), 1);
  EXPECT_EQ(m.at("gputravel_mux_resets_total{outcome=\"refused\"}"), 1);
  EXPECT_EQ(m.at("gputravel_mux_resets_total{outcome=\"ok\"}"), 0);
  EXPECT_EQ(m.at("gputravel_mux_route_seconds_count{outcome=\"ok\"}"), 2);
  EXPECT_EQ(m.at("gputravel_mux_route_seconds_count{outcome=\"failed\"}"), 1);
  const std::string text = registry_.Text();
  for (const char* name : {"gpu0", "td-a", "td-unlisted", "EBUSY"}) {
    EXPECT_EQ(text.find(name), std::string::npos) << name;
  }
}

TEST_F(MuxServiceTest, ErrorsCarryTheirCodes) {
  ASSERT_TRUE(Route("gpu0", "td-a", 5).ok());
  grpc::Status stale = Route("gpu0", "td-b", 4);
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(stale.error_message().find("stale fencing token"), std::string::npos);
  EXPECT_EQ(Route("gpu7", "td-a", 9).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(backend_.moves, 1);
}

TEST_F(MuxServiceTest, OperatorMayListAndReadButNotRouteOrReset) {
  auto op = StubAs(kOperator);
  ASSERT_TRUE(op);
  v1::ListGpusResponse list;
  grpc::Status s = ListGpus(op.get(), &list);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(list.gpus_size(), 2);

  s = Route("gpu0", "td-a", 1, op.get());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_NE(s.error_message().find("operator 'operator'"), std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("allowed roles: orchestrator"), std::string::npos)
      << s.error_message();

  v1::ResetGpuRequest rr;
  rr.set_gpu("gpu0");
  rr.set_fencing_token(1);
  v1::ResetGpuResponse rresp;
  grpc::ClientContext ctx;
  Deadline(&ctx);
  s = op->Reset(&ctx, rr, &rresp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_EQ(backend_.moves, 0);
  EXPECT_EQ(backend_.resets, 0);
}

// P8: a valid orchestrator certificate of the campaign CA is not enough;
// only the certificates the administrator pinned are obeyed.
TEST_F(MuxServiceTest, UnpinnedOrchestratorOfTheCampaignCaIsRefused) {
  auto rogue = StubAs(kRogue);
  ASSERT_TRUE(rogue);
  grpc::Status s = Route("gpu0", "td-a", 1, rogue.get());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_NE(s.error_message().find("not one the host's administrator pinned"),
            std::string::npos)
      << s.error_message();
  v1::ListGpusResponse list;
  EXPECT_EQ(ListGpus(rogue.get(), &list).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(backend_.moves, 0);
}

TEST_F(MuxServiceTest, CallersMustBePinnedOrchestratorsOrOperators) {
  EXPECT_FALSE(MuxCallers::FromPems({}, "callers").ok());
  auto mux = MuxCallers::FromPems({*ReadFile(TestFiles(Pki(), kMux).cert)}, "callers");
  EXPECT_EQ(mux.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(MuxCallers::FromPems({"not a certificate"}, "callers").ok());
}

// Every refused domain gets the same answer, and nothing reaches the backend.
TEST_F(MuxServiceTest, UnconfiguredDomainsGetOneAnswer) {
  grpc::Status a = Route("gpu0", "other-tenant-vm", 1);
  grpc::Status b = Route("gpu0", "no-such-vm", 1);
  EXPECT_EQ(a.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(b.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  std::string ma = a.error_message(), mb = b.error_message();
  ma.replace(ma.find("other-tenant-vm"), 15, "X");
  mb.replace(mb.find("no-such-vm"), 10, "X");
  EXPECT_EQ(ma, mb);
  EXPECT_EQ(backend_.moves, 0);
}

// A backend's detail (host paths, other VMs, holders' pids, the libvirt URI)
// stays in the MUX's log; the caller gets the code and its own request.
TEST_F(MuxServiceTest, ErrorsNameNothingOfTheHost) {
  backend_.fail = absl::FailedPreconditionError(
      "attaching GPU gpu0 (0000:98:00.0) to domain 'gt-a' (libvirt URI "
      "'qemu:///system') refused: attached to running domain 'other-tenant', held by "
      "pid 4242 (qemu-system-x86) via /dev/vfio/42");
  grpc::Status s = Route("gpu0", "td-a", 1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  for (const char* secret : {"0000:98", "gt-a", "qemu:///", "other-tenant", "4242",
                             "qemu-system", "/dev/vfio"}) {
    EXPECT_EQ(s.error_message().find(secret), std::string::npos)
        << secret << " in: " << s.error_message();
  }
  EXPECT_NE(s.error_message().find("gpu0"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("td-a"), std::string::npos) << s.error_message();
  v1::ResetGpuRequest rr;
  rr.set_gpu("gpu0");
  rr.set_fencing_token(1);
  v1::ResetGpuResponse rresp;
  grpc::ClientContext ctx;
  Deadline(&ctx);
  s = stub_->Reset(&ctx, rr, &rresp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message().find("4242"), std::string::npos) << s.error_message();
}

// Neither a caller's name nor a backend's text can forge a line of the MUX's
// log: what it logs of them is escaped.
TEST_F(MuxServiceTest, LogLinesAreEscaped) {
  backend_.fail = absl::InternalError("backend said\nvfio_mux: FORGED-BY-BACKEND");
  testing::internal::CaptureStderr();
  grpc::Status bad_name = Route("gpu0", "td-a\nvfio_mux: FORGED-BY-CALLER", 1);
  grpc::Status failed = Route("gpu0", "td-a", 1);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(bad_name.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(failed.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_NE(log.find("FORGED-BY-CALLER"), std::string::npos) << log;
  EXPECT_NE(log.find("FORGED-BY-BACKEND"), std::string::npos) << log;
  EXPECT_EQ(log.find("\nvfio_mux: FORGED"), std::string::npos) << log;
}

TEST_F(MuxServiceTest, ClientWithoutCertificateIsRefused) {
  // TLS trusting the MUX, but presenting no client certificate.
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = *ReadFile(CaCertPath(Pki()));
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride(ServerNameFor(kMux));
  auto anon = v1::Mux::NewStub(
      grpc::CreateCustomChannel(Endpoint(), grpc::SslCredentials(opts), args));
  v1::ListGpusResponse list;
  grpc::Status s = ListGpus(anon.get(), &list);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  s = Route("gpu0", "td-a", 1, anon.get());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  // Plaintext.
  auto plain = v1::Mux::NewStub(MakeChannel(Endpoint()));
  s = Route("gpu0", "td-a", 1, plain.get());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_EQ(backend_.moves, 0);
}

}  // namespace
}  // namespace gputravel
