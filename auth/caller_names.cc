#include "auth/caller_names.h"

#include "absl/strings/str_cat.h"

namespace gputravel {

absl::StatusOr<std::set<std::string>> ParseCallerNames(const nlohmann::json& j,
                                                       const std::string& where) {
  if (!j.is_array() || j.empty()) {
    return absl::InvalidArgumentError(
        where + ": must be a non-empty array of names, e.g. [\"orchestrator\"]: the only "
                "identities of that role accepted (another certificate of the role from the "
                "same CA is refused)");
  }
  std::set<std::string> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = absl::StrCat(where, "[", i, "]");
    if (!j[i].is_string()) return absl::InvalidArgumentError(at + ": must be a string (a name)");
    const std::string name = j[i].get<std::string>();
    absl::Status valid = ValidateName(name);
    if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(at, ": ", valid.message()));
    if (!out.insert(name).second) {
      return absl::InvalidArgumentError(at + ": '" + name + "' is listed twice");
    }
  }
  return out;
}

grpc::Status CheckCallerName(const Identity& id, const CallerNames& names) {
  auto it = names.find(id.role);
  if (it == names.end() || it->second.count(id.name) != 0) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      absl::StrCat(DescribeIdentity(id),
                                   " is not named in this server's configuration (it accepts "
                                   "only the ", id.role, " identities it names)"));
}

}  // namespace gputravel
