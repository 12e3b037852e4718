#ifndef GPUTRAVEL_UTIL_GRPC_STATUS_H_
#define GPUTRAVEL_UTIL_GRPC_STATUS_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"

namespace gputravel {

// absl::Status <-> grpc::Status (same code space).
grpc::Status ToGrpc(const absl::Status& s);
// `what` names the call for the user ("MUX Route", "holder hospital-a Provision").
// UNAVAILABLE gets the hint "(is the daemon running and the endpoint
// right?)", once: not again when the message passes on another daemon's
// failure that has it.
absl::Status FromGrpc(const grpc::Status& s, const std::string& what);

// A channel to a daemon: "unix:/path" or "host:port". Insecure transport is
// used only for the emulated, single-machine stack; every secret that crosses
// it is sealed by the application protocol (keyxfer).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& endpoint);

// The deadline of a gRPC call that may take `seconds` from now
// (grpc::ClientContext::set_deadline).
std::chrono::system_clock::time_point Deadline(double seconds);

// Large reads (device memory, 32 MiB max per read) need more than gRPC's 4 MiB.
inline constexpr int kMaxMessageBytes = 64 << 20;

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_GRPC_STATUS_H_
