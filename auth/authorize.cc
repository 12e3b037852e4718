#include "auth/authorize.h"

#include <grpc/grpc_security_constants.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "auth/identity_cache.h"

namespace gputravel {
namespace {

absl::Status NoClientCertificate() {
  return absl::UnauthenticatedError(
      "no client certificate: this server requires mutual TLS with a certificate "
      "from the campaign CA (`gputravel pki issue`)");
}

}  // namespace

absl::StatusOr<Identity> PeerIdentity(const grpc::AuthContext& auth) {
  std::vector<grpc::string_ref> pems;
  if (auth.IsPeerAuthenticated()) {
    pems = auth.FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  }
  if (pems.empty()) return NoClientCertificate();
  // Every call of a connection presents the same certificate: parse it once.
  static IdentityCache* const cache = new IdentityCache();
  absl::StatusOr<Identity> id = cache->Get(absl::string_view(pems[0].data(), pems[0].size()));
  if (!id.ok()) {
    return absl::UnauthenticatedError(
        absl::StrCat("client certificate: ", id.status().message()));
  }
  return id;
}

absl::StatusOr<Identity> PeerIdentity(const grpc::ServerContextBase& ctx) {
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth == nullptr) return NoClientCertificate();
  return PeerIdentity(*auth);
}

grpc::Status CheckRole(const Identity& id, const std::vector<std::string>& allowed_roles) {
  for (const std::string& role : allowed_roles) {
    if (id.role == role) return grpc::Status::OK;
  }
  return grpc::Status(
      grpc::StatusCode::PERMISSION_DENIED,
      absl::StrCat(DescribeIdentity(id), " may not call this; allowed roles: ",
                   allowed_roles.empty() ? "none" : absl::StrJoin(allowed_roles, ", ")));
}

grpc::Status Authorize(const grpc::ServerContextBase& ctx,
                       std::initializer_list<const char*> allowed_roles, Identity* out) {
  absl::StatusOr<Identity> id = PeerIdentity(ctx);
  if (!id.ok()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(id.status().message()));
  }
  grpc::Status s = CheckRole(*id, std::vector<std::string>(allowed_roles.begin(),
                                                            allowed_roles.end()));
  if (s.ok() && out != nullptr) *out = *id;
  return s;
}

grpc::Status AuthorizeSelf(const grpc::ServerContextBase& ctx, const std::string& role,
                           const std::string& name) {
  absl::StatusOr<Identity> id = PeerIdentity(ctx);
  if (!id.ok()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(id.status().message()));
  }
  Identity want{role, name};
  if (*id != want) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat(DescribeIdentity(*id), " may not act as ",
                                     DescribeIdentity(want)));
  }
  return grpc::Status::OK;
}

}  // namespace gputravel
