#ifndef GPUTRAVEL_KEYXFER_EXAMPLE_SECTIONS_H_
#define GPUTRAVEL_KEYXFER_EXAMPLE_SECTIONS_H_

// For tests: the attestation sections of deploy/examples, made usable.

#include "nlohmann/json.hpp"

namespace gputravel {

// `section` with every "REPLACE-WITH-..." placeholder in the lists of
// tdx.peer_policy and peer_rtmr3 replaced by a well-formed measurement, as a
// deployment would.
nlohmann::json WithPlaceholdersFilled(nlohmann::json section);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_EXAMPLE_SECTIONS_H_
