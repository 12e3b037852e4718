#include "orchestrator/holder_check.h"

#include <grpcpp/grpcpp.h>

#include "absl/time/clock.h"
#include "orchestrator/attestation_record.h"
#include "orchestrator/holder_channel.h"
#include "util/grpc_status.h"
#include "util/log.h"

namespace gputravel {
namespace {

std::string Field(const std::string& where, const std::string& field) {
  return where.empty() ? field : where + "." + field;
}

std::string Prefix(const std::string& where) { return where.empty() ? "" : where + ": "; }

}  // namespace

absl::StatusOr<v1::HolderInfo> FetchHolderInfo(v1::HolderAgent::Stub* stub,
                                               const HolderExpectation& want,
                                               double timeout_seconds, const std::string& where) {
  v1::HolderInfo info;
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(timeout_seconds));
  grpc::Status got = stub->GetInfo(&ctx, {}, &info);
  if (!got.ok()) {
    // gRPC's own text says what the endpoint is (no such socket, refused,
    // no route, a TLS failure): answered to the caller, it would let an
    // operator map the paths and network of the orchestrator's TD. The
    // detail stays in this log.
    GT_LOG(0, Prefix(where), "holder '", want.name, "' at ", want.endpoint,
           " GetInfo: ", got.error_message());
    return absl::UnavailableError(Prefix(where) + "holder '" + want.name +
                                  "' unreachable (the orchestrator's log says why)");
  }
  if (info.name() != want.name) {
    return absl::FailedPreconditionError(Prefix(where) + "the agent at " + want.endpoint +
                                         " calls itself '" + info.name() + "'");
  }
  if (!want.dataset_name.empty() && info.dataset_name() != want.dataset_name) {
    return absl::FailedPreconditionError(Field(where, "dataset.name") + ": holder '" + want.name +
                                         "' serves dataset '" + info.dataset_name() +
                                         "', not '" + want.dataset_name + "'");
  }
  if (!want.dataset_format.empty() && want.dataset_format != "auto" &&
      info.dataset_format() != want.dataset_format) {
    return absl::FailedPreconditionError(Field(where, "dataset.format") + ": holder '" +
                                         want.name + "' serves format '" +
                                         info.dataset_format() + "', not '" +
                                         want.dataset_format + "'");
  }
  if (info.domain() != want.domain) {
    return absl::FailedPreconditionError(Field(where, "domain") + ": holder '" + want.name +
                                         "' runs in TD '" + info.domain() + "', not '" +
                                         want.domain + "'");
  }
  return info;
}

absl::StatusOr<v1::HolderCheck> CheckHolder(v1::HolderAgent::Stub* stub,
                                            const HolderExpectation& want, Verifier& verifier,
                                            Attester& attester, double timeout_seconds) {
  auto info = FetchHolderInfo(stub, want, timeout_seconds, "");
  if (!info.ok()) return info.status();
  // Dropped unused: nothing is handed out on it.
  auto channel = OpenHolderChannel(stub, want.name, "holder '" + want.name + "'",
                                   timeout_seconds, verifier, attester, nullptr, nullptr);
  if (!channel.ok()) return channel.status();
  v1::HolderCheck out;
  out.set_name(info->name());
  out.set_domain(info->domain());
  out.set_dataset_name(info->dataset_name());
  out.set_dataset_format(info->dataset_format());
  out.set_dataset_bytes(info->dataset_bytes());
  *out.mutable_training_policy() = info->training_policy();
  *out.mutable_attestation() = RecordOf(channel->channel.peer, absl::ToUnixMillis(absl::Now()));
  return out;
}

absl::Status HolderCheckLimiter::Take(const std::string& endpoint, const std::string& name,
                                      absl::Time now) {
  absl::MutexLock l(&mu_);
  // Forget endpoints whose checks are all older than the window.
  for (auto it = taken_.begin(); it != taken_.end();) {
    std::deque<absl::Time>& times = it->second;
    while (!times.empty() && now - times.front() >= kHolderCheckWindow) times.pop_front();
    it = times.empty() ? taken_.erase(it) : std::next(it);
  }
  std::deque<absl::Time>& times = taken_[endpoint];
  if (static_cast<int>(times.size()) >= kMaxHolderChecks) {
    const int64_t wait = absl::ToInt64Seconds(kHolderCheckWindow - (now - times.front())) + 1;
    return absl::ResourceExhaustedError(
        "holder '" + name + "' at " + endpoint + " was checked " +
        std::to_string(kMaxHolderChecks) + " times in the last " +
        std::to_string(absl::ToInt64Minutes(kHolderCheckWindow)) +
        " minutes; each check leaves an attested channel at its agent, and more could push "
        "out a running campaign's: try again in " + std::to_string(wait) + " s");
  }
  times.push_back(now);
  return absl::OkStatus();
}

}  // namespace gputravel
