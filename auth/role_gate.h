#ifndef GPUTRAVEL_AUTH_ROLE_GATE_H_
#define GPUTRAVEL_AUTH_ROLE_GATE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "auth/caller_names.h"
#include "auth/revocation_list.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/auth_metadata_processor.h"

namespace gputravel {

// Which roles may call which method of a server: keys are full method paths
// ("/gputravel.v1.Orchestrator/GetCampaign") or a whole service
// ("/grpc.health.v1.Health/*"); values are role names (auth/identity.h).
using MethodRoles = std::map<std::string, std::vector<std::string>>;

// Refuses a call whose caller's certificate role may not call its method as
// soon as the call's headers arrive, before gRPC reads its request message:
// a refused caller costs the server a header and a flow-control window, not
// the body it sends (which may be as large as the server's receive limit).
//
// It runs as the server credentials' grpc::AuthMetadataProcessor, in the
// transport thread (IsBlocking false): the certificate's identity is parsed
// once per certificate (auth/identity_cache.h), so a check is a map lookup.
// A refused call ends PERMISSION_DENIED with the message Authorize gives
// ("trainer 't' may not call this; allowed roles: operator, scheduler"), one
// without a usable certificate UNAUTHENTICATED, a method not in `roles`
// UNIMPLEMENTED. The services still authorize every call themselves
// (Authorize, AuthorizeSelf): the gate only moves the role check ahead of
// the body; what a caller may do with its own name stays the service's.
// With `names`, a caller of a role listed there must also have one of its
// names (CheckCallerName), e.g. only the orchestrators a holder names. With
// `crl`, every call's client certificate is checked against it again
// (UNAUTHENTICATED "... is revoked ..."): a connection outlives the
// handshake that checked it, and a caller revoked since gets no further call
// on it.
class RoleGate final : public grpc::AuthMetadataProcessor {
 public:
  explicit RoleGate(MethodRoles roles, CallerNames names = {},
                    std::shared_ptr<RevocationList> crl = nullptr)
      : roles_(std::move(roles)), names_(std::move(names)), crl_(std::move(crl)) {}

  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

  // The decision for `method` from a caller with `auth` (what Process does).
  grpc::Status Check(const std::string& method, const grpc::AuthContext& auth) const;

 private:
  const MethodRoles roles_;
  const CallerNames names_;
  const std::shared_ptr<RevocationList> crl_;
};

// Installs a RoleGate with `roles` (and `names`, `crl`) on mTLS server
// credentials (auth/tls_config.h MakeServerCredentials; a daemon passes
// RevocationListOf its TLS files).
void InstallRoleGate(grpc::ServerCredentials* credentials, MethodRoles roles,
                     CallerNames names = {}, std::shared_ptr<RevocationList> crl = nullptr);

}  // namespace gputravel

#endif  // GPUTRAVEL_AUTH_ROLE_GATE_H_
