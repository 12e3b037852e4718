#ifndef GPUTRAVEL_UTIL_RPC_TRACE_H_
#define GPUTRAVEL_UTIL_RPC_TRACE_H_

#include <memory>

#include "grpcpp/support/server_interceptor.h"

namespace gputravel {

// A server interceptor that logs, at trace level (GT_LOG 3), each call's
// entry (method, peer address, the peer certificate's common name when there
// is one) and exit (status code and milliseconds taken). It logs no request,
// response or status message: only what the transport already shows.
// util/daemon_main.h installs it on every daemon's servers when --v=3.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeRpcTraceInterceptorFactory();

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_RPC_TRACE_H_
