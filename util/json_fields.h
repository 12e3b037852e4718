#ifndef GPUTRAVEL_UTIL_JSON_FIELDS_H_
#define GPUTRAVEL_UTIL_JSON_FIELDS_H_

#include <set>
#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace gputravel {

// Refuses a configuration object with a field that is not in `known`, so a
// misspelt optional field ("root_cert" for "root_ca", "heartbeat_seconds")
// is an error at start rather than a default silently taken. Every
// configuration reader checks its objects with this, so the error reads the
// same for every file: `where` (the file and the object's path), the field,
// the nearest accepted field when one is close, and all accepted fields:
//   "mux.json: libvirt: unknown field 'gpu' (did you mean 'gpus'? accepted: gpus, uri)"
//   "o.json: gpus[0]: unknown field 'bus' (accepted: device_ca, ...)"
// `where` "" gives a message that starts with "unknown field".
// OK for a value that is not an object (its own check reports that).
absl::Status RefuseUnknownFields(const nlohmann::json& j, const std::set<std::string>& known,
                                 const std::string& where);

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_JSON_FIELDS_H_
