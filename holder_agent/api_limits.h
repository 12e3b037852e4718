#ifndef GPUTRAVEL_HOLDER_AGENT_API_LIMITS_H_
#define GPUTRAVEL_HOLDER_AGENT_API_LIMITS_H_

#include "auth/role_gate.h"
#include "util/server_limits.h"

namespace gputravel {

// The largest request the holder agent reads. Its largest legitimate
// request is Provision: the orchestrator's evidence (a TDX quote v4 with its
// PCK certificate chain, 8000 bytes for the quote in shared/testdata; the
// emulated evidence about 1 KiB), the wrapped hand-off (about 200 bytes) and
// the binding (about 150 bytes). 64 KiB leaves room for a quote twice as
// large with every field of the request; OpenChannel carries a public key
// and a nonce, GetInfo nothing.
inline constexpr int kHolderMaxRequestBytes = 64 << 10;

// The agent's server limits: requests up to kHolderMaxRequestBytes, replies
// up to 1 MiB (its own evidence, progress and the report), 16 streams per
// connection, 32 MiB of gRPC buffers and 16 handler threads (the
// orchestrator runs one Provision at a time and prepares a few channels).
ServerLimits HolderApiLimits();

// Who may call what, before a request is read: only the orchestrator, as
// HolderService checks in each handler.
MethodRoles HolderApiRoles();

}  // namespace gputravel

#endif  // GPUTRAVEL_HOLDER_AGENT_API_LIMITS_H_
