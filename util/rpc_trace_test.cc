#include "util/rpc_trace.h"

#include <memory>
#include <string>
#include <vector>

#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "gtest/gtest.h"
#include "util/log.h"

namespace gputravel {
namespace {

// A server with the gRPC health service and the trace interceptor; one
// generic unary call to it, returning the call's status.
class RpcTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> trace;
    trace.push_back(MakeRpcTraceInterceptorFactory());
    b.experimental().SetInterceptorCreators(std::move(trace));
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    server_->Shutdown();
    SetLogLevel(1);
    SetLogFormat(LogFormat::kText);
  }

  // Health.Check with an empty request (service "": the whole server).
  grpc::Status Check() {
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                       grpc::InsecureChannelCredentials());
    grpc::GenericStub stub(channel);
    grpc::CompletionQueue cq;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::Slice empty("");
    grpc::ByteBuffer request(&empty, 1);
    auto call = stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
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

  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(RpcTraceTest, TraceLevelLogsEntryAndExit) {
  SetLogLevel(3);
  testing::internal::CaptureStderr();
  grpc::Status s = Check();
  const std::string out = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_NE(out.find("TRACE"), std::string::npos) << out;
  EXPECT_NE(out.find("rpc /grpc.health.v1.Health/Check from ipv4:127.0.0.1:"), std::string::npos)
      << out;
  EXPECT_NE(out.find(" begins"), std::string::npos) << out;
  EXPECT_NE(out.find("rpc /grpc.health.v1.Health/Check ends: OK ("), std::string::npos) << out;
  EXPECT_LT(out.find(" begins"), out.find(" ends: ")) << out;
}

TEST_F(RpcTraceTest, BelowTraceLevelNothingIsLogged) {
  SetLogLevel(2);
  testing::internal::CaptureStderr();
  grpc::Status s = Check();
  const std::string out = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(out.find("rpc /grpc.health.v1.Health/Check"), std::string::npos) << out;
}

}  // namespace
}  // namespace gputravel
