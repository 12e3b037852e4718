#include "vfio_mux/mux_service.h"

#include <stdlib.h>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "util/grpc_status.h"

namespace gputravel {
namespace {

class CountingBackend : public RoutingBackend {
 public:
  std::string Name() const override { return "counting"; }
  absl::StatusOr<std::vector<GpuDevice>> ListGpus() override {
    return std::vector<GpuDevice>{{"gpu0", "", "", ""}, {"gpu1", "", "", ""}};
  }
  absl::Status Move(const std::string&, const std::string&, const std::string&) override {
    ++moves;
    return absl::OkStatus();
  }
  absl::Status Reset(const std::string&) override {
    ++resets;
    return absl::OkStatus();
  }
  int moves = 0, resets = 0;
};

// The Mux API over real gRPC on a Unix socket.
class MuxServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gputravel-mux-XXXXXX";
    dir_ = mkdtemp(tmpl);
    table_ = *RouteTable::Open(&backend_, dir_ + "/state.json", dir_ + "/audit.log");
    service_ = std::make_unique<MuxService>(table_.get(), backend_.Name());
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + dir_ + "/mux.sock", grpc::InsecureServerCredentials());
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    stub_ = v1::Mux::NewStub(MakeChannel("unix:" + dir_ + "/mux.sock"));
  }
  void TearDown() override {
    server_->Shutdown();
    (void)system(("rm -rf " + dir_).c_str());
  }
  grpc::Status Route(const std::string& gpu, const std::string& domain, uint64_t token) {
    v1::RouteRequest r;
    r.set_gpu(gpu);
    r.set_domain(domain);
    r.set_fencing_token(token);
    v1::RouteResponse resp;
    grpc::ClientContext ctx;
    return stub_->Route(&ctx, r, &resp);
  }
  std::string dir_;
  CountingBackend backend_;
  std::unique_ptr<RouteTable> table_;
  std::unique_ptr<MuxService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Mux::Stub> stub_;
};

TEST_F(MuxServiceTest, ListRouteGetReset) {
  v1::ListGpusResponse list;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->ListGpus(&ctx, {}, &list).ok());
  }
  ASSERT_EQ(list.gpus_size(), 2);
  EXPECT_EQ(list.gpus(0).backend(), "counting");
  ASSERT_TRUE(Route("gpu1", "td-a", 3).ok());
  v1::GetRouteRequest g;
  g.set_gpu("gpu1");
  v1::GpuRoute route;
  {
    grpc::ClientContext ctx;
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
    ASSERT_TRUE(stub_->Reset(&ctx, rr, &rresp).ok());
  }
  EXPECT_EQ(backend_.resets, 1);
}

TEST_F(MuxServiceTest, ErrorsCarryTheirCodes) {
  ASSERT_TRUE(Route("gpu0", "td-a", 5).ok());
  grpc::Status stale = Route("gpu0", "td-b", 4);
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(stale.error_message().find("stale fencing token"), std::string::npos);
  EXPECT_EQ(Route("gpu7", "td-a", 9).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(backend_.moves, 1);
}

}  // namespace
}  // namespace gputravel
