#ifndef GPUTRAVEL_VFIO_MUX_MUX_CALLERS_H_
#define GPUTRAVEL_VFIO_MUX_MUX_CALLERS_H_

#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "auth/identity.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"

namespace gputravel {

// The callers the host's administrator admits to the MUX (P8): certificates
// pinned in the MUX's root-owned configuration, compared byte for byte
// (SHA-256 of the DER). The TLS handshake still checks the chain to tls.ca,
// but the campaign CA is the tenant's: whoever holds its key can issue any
// "orchestrator" certificate, and none of those is admitted unless the
// administrator pinned that very certificate.
class MuxCallers {
 public:
  // The MUX configuration's required "callers": a non-empty array of paths
  // to PEM certificates (one each) of role orchestrator or operator.
  static absl::StatusOr<MuxCallers> FromConfig(const nlohmann::json& config,
                                               const std::string& where);
  // The same from PEM texts; `where` names them in errors.
  static absl::StatusOr<MuxCallers> FromPems(const std::vector<std::string>& pems,
                                             const std::string& where);

  // OK if the call's client certificate is pinned and its role is one of
  // `roles`; otherwise UNAUTHENTICATED or PERMISSION_DENIED, naming only the
  // caller's own identity.
  grpc::Status Authorize(const grpc::ServerContextBase& ctx,
                         std::initializer_list<const char*> roles) const;

  size_t size() const { return pinned_.size(); }

 private:
  std::map<std::string, Identity> pinned_;  // SHA-256 of DER -> identity
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_MUX_CALLERS_H_
