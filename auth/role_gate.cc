#include "auth/role_gate.h"

#include "absl/status/statusor.h"
#include "auth/authorize.h"
#include "auth/identity.h"
#include "grpc/grpc_security_constants.h"
#include "keyxfer/x509.h"

namespace gputravel {

grpc::Status RoleGate::Check(const std::string& method, const grpc::AuthContext& auth) const {
  auto it = roles_.find(method);
  if (it == roles_.end()) {
    const size_t slash = method.rfind('/');
    if (slash != std::string::npos && slash > 0) {
      it = roles_.find(method.substr(0, slash + 1) + "*");
    }
  }
  if (it == roles_.end()) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "method " + method + " is not served here");
  }
  absl::StatusOr<Identity> id = PeerIdentity(auth);
  if (!id.ok()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(id.status().message()));
  }
  grpc::Status role = CheckRole(*id, it->second);
  if (!role.ok()) return role;
  grpc::Status named = CheckCallerName(*id, names_);
  if (!named.ok() || crl_ == nullptr) return named;
  std::vector<grpc::string_ref> pems = auth.FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  X509Ptr cert = pems.empty() ? nullptr
                              : ParseCertificate(absl::string_view(pems[0].data(), pems[0].size()));
  if (!cert) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no client certificate to check");
  }
  absl::Status revoked = crl_->Check(cert.get());
  if (!revoked.ok()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "the client's " + std::string(revoked.message()));
  }
  return grpc::Status::OK;
}

grpc::Status RoleGate::Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                               OutputMetadata*, OutputMetadata*) {
  auto path = auth_metadata.find(":path");
  if (path == auth_metadata.end() || context == nullptr) {
    // gRPC always passes both; a call without them is not one we can judge.
    return grpc::Status(grpc::StatusCode::INTERNAL, "call without a method path");
  }
  return Check(std::string(path->second.data(), path->second.size()), *context);
}

void InstallRoleGate(grpc::ServerCredentials* credentials, MethodRoles roles,
                     CallerNames names, std::shared_ptr<RevocationList> crl) {
  credentials->SetAuthMetadataProcessor(
      std::make_shared<RoleGate>(std::move(roles), std::move(names), std::move(crl)));
}

}  // namespace gputravel
