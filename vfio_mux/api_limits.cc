#include "vfio_mux/api_limits.h"

#include "auth/identity.h"
#include "vfio_mux/mux_policy.h"

namespace gputravel {

ServerLimits MuxApiLimits() {
  ServerLimits l;
  l.max_receive_bytes = kMaxMuxRequestBytes;
  l.max_send_bytes = 1 << 20;
  l.max_concurrent_streams = 16;
  l.quota_bytes = int64_t{16} << 20;
  l.max_threads = kMaxMuxServerThreads;
  return l;
}

MethodRoles MuxApiRoles() {
  return {{"/gputravel.v1.Mux/ListGpus", {kRoleOrchestrator, kRoleOperator}},
          {"/gputravel.v1.Mux/GetRoute", {kRoleOrchestrator, kRoleOperator}},
          {"/gputravel.v1.Mux/Route", {kRoleOrchestrator}},
          {"/gputravel.v1.Mux/Reset", {kRoleOrchestrator}}};
}

}  // namespace gputravel
