#ifndef GPUTRAVEL_AUTH_CALLER_NAMES_H_
#define GPUTRAVEL_AUTH_CALLER_NAMES_H_

#include <map>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "auth/identity.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"

namespace gputravel {

// Callers accepted by name, not only by role: whoever holds the campaign CA's
// key can mint a certificate of any role, so a party that must obey one
// particular orchestrator (a holder agent) names it in its configuration.
// Maps a role to the only names accepted for it; a role not in the map is
// not restricted by name (the role check still applies).
using CallerNames = std::map<std::string, std::set<std::string>>;

// Parses a configuration's list of names, e.g. a holder's
// "orchestrator_names": ["orchestrator"]: a non-empty JSON array of valid
// names (ValidateName), no duplicates. Errors name `where` and say what the
// list is for.
absl::StatusOr<std::set<std::string>> ParseCallerNames(const nlohmann::json& j,
                                                       const std::string& where);

// OK unless `names` restricts `id.role` and `id.name` is not listed;
// otherwise PERMISSION_DENIED "orchestrator 'x' is not named in this
// server's configuration (...)" (the accepted names are not revealed).
grpc::Status CheckCallerName(const Identity& id, const CallerNames& names);

}  // namespace gputravel

#endif  // GPUTRAVEL_AUTH_CALLER_NAMES_H_
