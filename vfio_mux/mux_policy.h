#ifndef GPUTRAVEL_VFIO_MUX_MUX_POLICY_H_
#define GPUTRAVEL_VFIO_MUX_MUX_POLICY_H_

#include <cstddef>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace gputravel {

// What the host's administrator lets the MUX touch (P8): names a request may
// carry, the domains a GPU may be routed to, and what a caller is told when
// the MUX refuses. Nothing here depends on the caller's certificate.

// GPU and domain names, in the configuration and in requests: 1..63
// characters of [A-Za-z0-9._-], starting with a letter or digit. A request
// is checked against this before anything else, so no journal line, log line
// or backend call ever carries a longer or stranger name.
inline constexpr size_t kMaxMuxNameLength = 63;
// The largest MUX request: two names and a token fit in a few hundred
// bytes; the server refuses anything larger before it is parsed.
inline constexpr int kMaxMuxRequestBytes = 4096;
// Threads the MUX's gRPC server may run: calls past it wait or are refused
// RESOURCE_EXHAUSTED instead of piling up behind a slow move.
inline constexpr int kMaxMuxServerThreads = 16;
// `kind` is "GPU" or "domain", for the message. INVALID_ARGUMENT, marked for
// the caller (the message quotes at most the first characters, escaped).
absl::Status ValidateMuxName(absl::string_view kind, absl::string_view name);

// The one refusal for a domain the configuration does not list: the same
// code and text whether or not a VM of that name exists on the host, runs,
// or holds a device (PERMISSION_DENIED, marked for the caller).
absl::Status DomainNotConfigured(absl::string_view domain);

// The MUX configuration's required top-level "domains": a non-empty array of
// distinct valid names, the only domains any backend routes a GPU to.
absl::StatusOr<std::set<std::string>> ParseMuxDomains(const nlohmann::json& config,
                                                      const std::string& where);

// A status whose message names nothing of the host beyond the request's own
// GPU, domain and token: MuxService returns it to the caller as it is.
absl::Status ForCaller(absl::Status status);
bool IsForCaller(const absl::Status& status);

// What the caller is told about `status`: its own message if marked
// ForCaller, otherwise the same code with "`what` failed at the host; ..."
// (the detail goes to the MUX's log only).
absl::Status CallerView(const absl::Status& status, const std::string& what);

// `text` fit for one log line: non-printable bytes (newlines included)
// escaped, cut to `max` bytes.
std::string LogSafe(absl::string_view text, size_t max = 512);

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_MUX_POLICY_H_
