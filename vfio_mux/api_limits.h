#ifndef GPUTRAVEL_VFIO_MUX_API_LIMITS_H_
#define GPUTRAVEL_VFIO_MUX_API_LIMITS_H_

#include "auth/role_gate.h"
#include "util/server_limits.h"

namespace gputravel {

// The MUX's server limits: requests up to kMaxMuxRequestBytes
// (mux_policy.h), replies up to 1 MiB (ListGpus, about 100 bytes a GPU), 16
// streams per connection, 16 MiB of gRPC buffers and kMaxMuxServerThreads
// handler threads.
ServerLimits MuxApiLimits();

// Who may call what, before a request is read, as MuxService checks in each
// handler: the orchestrator everything, operators ListGpus and GetRoute.
MethodRoles MuxApiRoles();

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_API_LIMITS_H_
