#include "util/grpc_status.h"

#include <string>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

constexpr char kHint[] = "(is the daemon running and the endpoint right?)";

size_t Count(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

TEST(GrpcStatusTest, AnUnavailableDaemonGetsTheHint) {
  absl::Status s = FromGrpc(grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused"),
                            "MUX Route");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), std::string("MUX Route: connection refused ") + kHint);
  absl::Status other =
      FromGrpc(grpc::Status(grpc::StatusCode::NOT_FOUND, "no such GPU"), "MUX Route");
  EXPECT_EQ(other.message(), "MUX Route: no such GPU");
}

// A holder passing on the GPU's failure (its own FromGrpc added the hint):
// the orchestrator's message says it once.
TEST(GrpcStatusTest, TheHintIsGivenOnceAcrossDaemons) {
  absl::Status at_holder = FromGrpc(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused"), "GPU SubmitH2D");
  absl::Status at_orchestrator = FromGrpc(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(at_holder.message())),
      "holder h Provision");
  EXPECT_EQ(at_orchestrator.message(),
            std::string("holder h Provision: GPU SubmitH2D: connection refused ") + kHint);
  EXPECT_EQ(Count(std::string(at_orchestrator.message()), kHint), 1u);
}

}  // namespace
}  // namespace gputravel
