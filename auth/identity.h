#ifndef GPUTRAVEL_AUTH_IDENTITY_H_
#define GPUTRAVEL_AUTH_IDENTITY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gputravel {

// The roles of GPU Travelling. Every certificate of a campaign carries exactly
// one role and one name; authorization decisions are made on both.
enum class Role { kOrchestrator, kHolder, kOperator, kScheduler, kMux, kTrainer };

// Role names as they appear in certificates (OU), SANs and on the command line.
inline constexpr char kRoleOrchestrator[] = "orchestrator";
inline constexpr char kRoleHolder[] = "holder";
inline constexpr char kRoleOperator[] = "operator";
inline constexpr char kRoleScheduler[] = "scheduler";
inline constexpr char kRoleMux[] = "mux";
inline constexpr char kRoleTrainer[] = "trainer";

const char* RoleName(Role role);
// "holder" -> Role::kHolder. The error lists the valid roles.
absl::StatusOr<Role> ParseRole(absl::string_view role);
// All role names, in declaration order.
std::vector<std::string> AllRoleNames();

// Who is at the other end of a connection.
struct Identity {
  std::string role;  // One of the role names above.
  std::string name;  // [a-z0-9][a-z0-9._-]{0,62}, no "..".
};

bool operator==(const Identity& a, const Identity& b);
bool operator!=(const Identity& a, const Identity& b);

// "holder 'hospital-a'": for messages.
std::string DescribeIdentity(const Identity& id);

// Names: 1..63 characters, [a-z0-9][a-z0-9._-]*, without ".." (each name
// becomes a DNS label sequence). Errors quote the bad value and say why.
absl::Status ValidateName(absl::string_view name);
// Role known and name valid.
absl::Status ValidateIdentity(const Identity& id);

// The DNS form used as SAN dNSName and as the gRPC server name that a client
// verifies: "<name>.<role>.gputravel".
std::string ServerNameFor(const Identity& id);
// The URI form used as SAN URI: "gputravel://<role>/<name>".
std::string IdentityUri(const Identity& id);

// The identity a certificate (PEM or DER) encodes. Prefers the SAN URI
// gputravel://<role>/<name>; requires Subject CN == name and OU == role, at
// most one gputravel URI, and every SAN dNSName equal to ServerNameFor(id).
// Does not check the signature or validity period (the TLS handshake does).
absl::StatusOr<Identity> IdentityFromCertificate(absl::string_view pem_or_der);

}  // namespace gputravel

#endif  // GPUTRAVEL_AUTH_IDENTITY_H_
