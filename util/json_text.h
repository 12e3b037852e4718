#ifndef GPUTRAVEL_UTIL_JSON_TEXT_H_
#define GPUTRAVEL_UTIL_JSON_TEXT_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gputravel {

// Parses the text of a configuration file without exceptions. Refuses a key
// that appears twice in the same object (nlohmann::json would silently keep
// the last one, so `"rounds": 5, "rounds": 1` would run one round), naming
// its path, and a syntax error with its byte position:
//   "mux.json: libvirt.gpus[1].name: appears twice in the same object"
//   "mux.json: invalid JSON at byte 23: parse error at line 2, column 9: ..."
// `where` names the file or value ("" for none).
absl::StatusOr<nlohmann::json> ParseJsonText(const std::string& text, const std::string& where);

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_JSON_TEXT_H_
