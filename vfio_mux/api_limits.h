#ifndef GPUTRAVEL_VFIO_MUX_API_LIMITS_H_
#define GPUTRAVEL_VFIO_MUX_API_LIMITS_H_

#include "auth/role_gate.h"
#include "util/server_limits.h"

namespace gputravel {

// The largest request the MUX reads. Its requests name a GPU, a domain and
// a fencing token (Route, the largest, is under 200 bytes): 16 KiB is a
// wide margin.
inline constexpr int kMuxMaxRequestBytes = 16 << 10;

// The MUX's server limits: requests up to kMuxMaxRequestBytes, replies up
// to 1 MiB (ListGpus, about 100 bytes a GPU), 16 streams per connection,
// 16 MiB of gRPC buffers and 16 handler threads.
ServerLimits MuxApiLimits();

// Who may call what, before a request is read, as MuxService checks in each
// handler: the orchestrator everything, operators ListGpus and GetRoute.
MethodRoles MuxApiRoles();

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_API_LIMITS_H_
