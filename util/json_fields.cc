#include "util/json_fields.h"

namespace gputravel {

absl::Status RefuseUnknownFields(const nlohmann::json& j, const std::set<std::string>& known,
                                 const std::string& where) {
  if (!j.is_object()) return absl::OkStatus();
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (known.count(it.key()) != 0) continue;
    std::string accepted;
    for (const std::string& k : known) accepted += (accepted.empty() ? "" : ", ") + k;
    return absl::InvalidArgumentError(where + ": unknown field '" + it.key() +
                                      "' (accepted: " + accepted + ")");
  }
  return absl::OkStatus();
}

}  // namespace gputravel
