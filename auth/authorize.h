#ifndef GPUTRAVEL_AUTH_AUTHORIZE_H_
#define GPUTRAVEL_AUTH_AUTHORIZE_H_

#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "auth/identity.h"
#include "grpcpp/grpcpp.h"

namespace gputravel {

// Per-call authorization by certificate identity, for servers built with
// MakeServerCredentials (auth/tls_config.h). Takes grpc::ServerContextBase so
// both the sync (grpc::ServerContext) and callback APIs can use it.

// The verified client identity of this call, from the TLS auth context
// (GRPC_X509_PEM_CERT_PROPERTY_NAME). UNAUTHENTICATED "no client certificate"
// on a call without one (an insecure port, or TLS without client auth), or if
// the certificate does not encode a GPU Travelling identity.
absl::StatusOr<Identity> PeerIdentity(const grpc::ServerContextBase& ctx);
// The same from a connection's auth context (auth/role_gate.h, which runs
// before a call reaches a service).
absl::StatusOr<Identity> PeerIdentity(const grpc::AuthContext& auth);

// OK if `id.role` is one of `allowed_roles`, else PERMISSION_DENIED in the
// words of Authorize below.
grpc::Status CheckRole(const Identity& id, const std::vector<std::string>& allowed_roles);

// OK if the caller's role is one of `allowed_roles` (role names, e.g.
// kRoleOrchestrator); stores the caller's identity in `out` if given.
// Otherwise UNAUTHENTICATED (see PeerIdentity) or PERMISSION_DENIED naming the
// caller and the allowed roles: "holder 'hospital-a' may not call this;
// allowed roles: orchestrator".
grpc::Status Authorize(const grpc::ServerContextBase& ctx,
                       std::initializer_list<const char*> allowed_roles,
                       Identity* out = nullptr);

// "Acts only as itself": OK only if the caller is exactly <role, name>, e.g. a
// holder reporting for holder `name`. PERMISSION_DENIED "holder 'b' may not
// act as holder 'a'" otherwise.
grpc::Status AuthorizeSelf(const grpc::ServerContextBase& ctx, const std::string& role,
                           const std::string& name);

}  // namespace gputravel

#endif  // GPUTRAVEL_AUTH_AUTHORIZE_H_
