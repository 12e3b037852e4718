#ifndef GPUTRAVEL_ORCHESTRATOR_API_LIMITS_H_
#define GPUTRAVEL_ORCHESTRATOR_API_LIMITS_H_

#include "auth/role_gate.h"
#include "util/server_limits.h"

namespace gputravel {

// The largest request the orchestrator reads. Its largest legitimate
// request is CreateCampaign: a request_id (<= 128 bytes) and the spec JSON,
// about 1 KiB plus about 250 bytes per holder (docs/campaign-config.md), so
// 256 KiB takes a campaign of a thousand holders; every other request
// carries a campaign name.
inline constexpr int kOrchestratorMaxRequestBytes = 256 << 10;

// The gRPC memory (ResourceQuota) of the orchestrator's server: what its
// transports may buffer for all callers together. Its replies are small
// but for a campaign with its trips (about 200 bytes a trip).
inline constexpr int kOrchestratorQuotaMiB = 64;

// Watch streams (WatchCampaign) one caller identity may hold open at once;
// each holds a server thread while it waits.
inline constexpr int kMaxWatchesPerCaller = 8;

// The scheduler API server's limits: requests up to
// kOrchestratorMaxRequestBytes; replies up to kMaxMessageBytes (a campaign
// with its trips); 32 streams per connection; kOrchestratorQuotaMiB of gRPC
// buffers and 64 handler threads (watch streams included:
// kMaxWatchesPerCaller each).
ServerLimits OrchestratorApiLimits();

// Who may call what, checked before a request is read (auth/role_gate.h);
// the same roles OrchestratorService checks in each handler: operators and
// schedulers everything, holders ListHolders (their own rows), and the
// health and reflection services operators and schedulers.
MethodRoles OrchestratorApiRoles();

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_API_LIMITS_H_
