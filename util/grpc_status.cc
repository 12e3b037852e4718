#include "util/grpc_status.h"

namespace gputravel {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

absl::Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  constexpr char kHint[] = " (is the daemon running and the endpoint right?)";
  std::string msg = what + ": " + s.error_message();
  // A daemon passing on another's failure already carries the hint.
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE &&
      s.error_message().find(kHint) == std::string::npos) {
    msg += kHint;
  }
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), msg);
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& endpoint) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  return grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(),
                                   args);
}

std::chrono::system_clock::time_point Deadline(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace gputravel
