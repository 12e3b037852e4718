#include "holder_agent/api_limits.h"

#include "auth/identity.h"

namespace gputravel {

ServerLimits HolderApiLimits() {
  ServerLimits l;
  l.max_receive_bytes = kHolderMaxRequestBytes;
  l.max_send_bytes = 1 << 20;
  l.max_concurrent_streams = 16;
  l.quota_bytes = int64_t{32} << 20;
  l.max_threads = 16;
  return l;
}

MethodRoles HolderApiRoles() {
  return {{"/gputravel.v1.HolderAgent/*", {kRoleOrchestrator}}};
}

}  // namespace gputravel
