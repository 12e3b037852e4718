#include "vfio_mux/emulated_backend.h"

#include <set>

#include <atomic>

#include "auth/test_server.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace gputravel {
namespace {

// A device admin socket that counts the calls it gets.
class CountingAdmin final : public v1::DeviceAdmin::Service {
 public:
  grpc::Status SetOwner(grpc::ServerContext*, const v1::SetOwnerRequest* req,
                        v1::SetOwnerResponse* resp) override {
    ++set_owner;
    owner = req->domain();
    if (report_status) resp->mutable_status()->set_owner(lie ? "someone-else" : owner);
    return grpc::Status::OK;
  }
  grpc::Status GetStatus(grpc::ServerContext*, const v1::GetStatusRequest*,
                         v1::DeviceStatus* out) override {
    ++get_status;
    out->set_owner(owner);
    return grpc::Status::OK;
  }
  grpc::Status Reset(grpc::ServerContext*, const v1::ResetRequest*,
                     v1::ResetResponse*) override {
    ++resets;
    return grpc::Status::OK;
  }
  std::atomic<int> set_owner{0}, get_status{0}, resets{0};
  std::string owner;
  bool report_status = true;  // as device/device_service.cc does
  bool lie = false;
};

class EmulatedBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    const std::string endpoint = "unix:" + tmp_.path() + "/admin.sock";
    grpc::ServerBuilder b;
    b.AddListeningPort(endpoint, grpc::InsecureServerCredentials());
    b.RegisterService(&admin_);
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_);
    backend_ = std::make_unique<EmulatedBackend>(
        std::map<std::string, std::string>{{"gpu0", endpoint}},
        std::set<std::string>{"td-a", "orch"});
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }
  int Rpcs() const { return admin_.set_owner + admin_.get_status + admin_.resets; }
  TempDir tmp_;
  CountingAdmin admin_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<EmulatedBackend> backend_;
};

TEST_F(EmulatedBackendTest, MoveIsOneRoundTrip) {
  ASSERT_TRUE(backend_->Move("gpu0", "", "td-a").ok());
  ASSERT_TRUE(backend_->Move("gpu0", "td-a", "orch").ok());
  ASSERT_TRUE(backend_->Move("gpu0", "orch", "").ok());
  EXPECT_EQ(admin_.set_owner, 3);
  EXPECT_EQ(admin_.get_status, 0);
  EXPECT_EQ(Rpcs(), 3);
  EXPECT_EQ(admin_.owner, "");
}

TEST_F(EmulatedBackendTest, UnconfiguredDomainNeverReachesTheDevice) {
  absl::Status s = backend_->Move("gpu0", "", "other-tenant-vm");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_EQ(Rpcs(), 0);
}

TEST_F(EmulatedBackendTest, MoveRefusedWhenTheDeviceReportsAnotherOwner) {
  admin_.lie = true;
  absl::Status s = backend_->Move("gpu0", "orch", "td-a");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("reports owner 'someone-else'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("to 'td-a'"), std::string::npos) << s;
}

// A device that answers SetOwner without its status is asked for it.
TEST_F(EmulatedBackendTest, DeviceWithoutStatusInSetOwnerIsAsked) {
  admin_.report_status = false;
  ASSERT_TRUE(backend_->Move("gpu0", "", "td-a").ok());
  EXPECT_EQ(admin_.set_owner, 1);
  EXPECT_EQ(admin_.get_status, 1);
}

TEST_F(EmulatedBackendTest, UnknownGpuAndUnreachableDeviceNamed) {
  absl::Status s = backend_->Move("gpu7", "", "td-a");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("gpu7"), std::string::npos) << s;
  server_->Shutdown();
  server_.reset();
  s = backend_->Move("gpu0", "", "td-a");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("emulated GPU gpu0 SetOwner"), std::string::npos) << s;
}

TEST_F(EmulatedBackendTest, ResetIsOneRoundTrip) {
  ASSERT_TRUE(backend_->Reset("gpu0").ok());
  EXPECT_EQ(admin_.resets, 1);
  EXPECT_EQ(Rpcs(), 1);
}

}  // namespace
}  // namespace gputravel
