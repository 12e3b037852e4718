#ifndef GPUTRAVEL_UTIL_SERVER_LIMITS_H_
#define GPUTRAVEL_UTIL_SERVER_LIMITS_H_

#include <cstdint>
#include <string>

#include "grpcpp/grpcpp.h"
#include "util/grpc_status.h"

namespace gputravel {

// What one gRPC server lets its callers cost it. Every daemon's server is
// built with one (util/daemon_main.h ServedEndpoint::limits); each API's
// values, and why, are next to its service (OrchestratorService, HolderService,
// MuxService). The defaults are the emulated device's: its sockets stand for
// the PCIe bus of the TDs it serves, not for a network API.
struct ServerLimits {
  // The largest request message the server accepts (gRPC refuses a larger
  // one RESOURCE_EXHAUSTED). Sized to the API's largest legitimate request
  // with margin: a limit is what any certificate holder can make the server
  // buffer per call.
  int max_receive_bytes = kMaxMessageBytes;
  // The largest reply (device memory read-backs are 32 MiB).
  int max_send_bytes = kMaxMessageBytes;
  // Streams one client connection may have open at once
  // (GRPC_ARG_MAX_CONCURRENT_STREAMS): more wait in the client.
  int max_concurrent_streams = 256;
  // A grpc::ResourceQuota for the server: the memory its transports may
  // buffer (past it gRPC shrinks flow-control windows and refuses new
  // streams) and the threads of its synchronous handlers (past it a new
  // call is refused RESOURCE_EXHAUSTED). 0 bytes: no memory bound.
  int64_t quota_bytes = 0;
  int max_threads = 256;
};

// Sets `limits` on `builder`, with a ResourceQuota named `name` (it names
// the quota in gRPC's traces).
void ApplyServerLimits(const ServerLimits& limits, const std::string& name,
                       grpc::ServerBuilder* builder);

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_SERVER_LIMITS_H_
