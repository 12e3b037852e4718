#ifndef GPUTRAVEL_ORCHESTRATOR_HOLDER_CHECK_H_
#define GPUTRAVEL_ORCHESTRATOR_HOLDER_CHECK_H_

// What the orchestrator checks of a holder's agent before it names it in a
// campaign: that the agent answers as the holder it was told of, serves the
// expected dataset in the expected TD, and (preflight) attests.

#include <deque>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "keyxfer/attester.h"
#include "proto/holder.grpc.pb.h"
#include "proto/orchestrator.pb.h"

namespace gputravel {

// What a campaign (or a preflight) expects of one holder's agent.
struct HolderExpectation {
  std::string name;
  std::string endpoint;
  std::string domain;
  std::string dataset_name;    // empty: any
  std::string dataset_format;  // empty or "auto": any
};

// Asks the agent behind `stub` (a channel that requires the holder's
// certificate) what it serves and checks that against `want`. `where` names
// the holder in messages ("holders[2]", or "" for none); the field checked
// follows it ("holders[2].domain: ..."). UNAVAILABLE "holder 'N'
// unreachable (the orchestrator's log says why)" when it does not answer:
// gRPC's own text (socket paths, addresses, TLS detail) goes to the log
// only; FAILED_PRECONDITION for a mismatch.
absl::StatusOr<v1::HolderInfo> FetchHolderInfo(v1::HolderAgent::Stub* stub,
                                               const HolderExpectation& want,
                                               double timeout_seconds, const std::string& where);

// The preflight: FetchHolderInfo, then an attested channel opened with the
// agent and dropped unused (nothing is provisioned, no key handed out); the
// agent's evidence must verify and meet `verifier`'s policy. `attester`
// makes this orchestrator's own half of the exchange.
absl::StatusOr<v1::HolderCheck> CheckHolder(v1::HolderAgent::Stub* stub,
                                            const HolderExpectation& want, Verifier& verifier,
                                            Attester& attester, double timeout_seconds);

// Each preflight leaves an attested channel unclaimed at the agent, which
// keeps at most 16 for up to 10 minutes and drops the oldest to make room
// (holder_agent/holder_service.h): unbounded checks would push out the
// channel a running campaign prepared for its next trip. At most
// kMaxHolderChecks preflights of one agent (endpoint) per kHolderCheckWindow
// leave it room for the campaigns' own.
inline constexpr int kMaxHolderChecks = 8;
inline constexpr absl::Duration kHolderCheckWindow = absl::Minutes(10);

// Counts preflights per agent endpoint. Thread-safe.
class HolderCheckLimiter {
 public:
  // Takes one of the endpoint's preflights at `now`, or RESOURCE_EXHAUSTED
  // naming the holder and when to try again.
  absl::Status Take(const std::string& endpoint, const std::string& name, absl::Time now);

 private:
  absl::Mutex mu_;
  std::map<std::string, std::deque<absl::Time>> taken_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_HOLDER_CHECK_H_
