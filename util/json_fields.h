#ifndef GPUTRAVEL_UTIL_JSON_FIELDS_H_
#define GPUTRAVEL_UTIL_JSON_FIELDS_H_

#include <set>
#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace gputravel {

// Refuses a configuration object with a field that is not in `known`, so a
// misspelt optional field ("root_cert" for "root_ca", "heartbeat_seconds")
// is an error at start rather than a default silently taken. The error
// names `where`, the field and the accepted fields:
//   "mux.json: libvirt: unknown field 'detach_timeout' (accepted: ...)".
// OK for a value that is not an object (its own check reports that).
absl::Status RefuseUnknownFields(const nlohmann::json& j, const std::set<std::string>& known,
                                 const std::string& where);

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_JSON_FIELDS_H_
