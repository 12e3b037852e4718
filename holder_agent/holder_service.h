#ifndef GPUTRAVEL_HOLDER_AGENT_HOLDER_SERVICE_H_
#define GPUTRAVEL_HOLDER_AGENT_HOLDER_SERVICE_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "auth/identity.h"
#include "device/bounce_pool.h"
#include "device/h2d_writer.h"
#include "grpcpp/grpcpp.h"
#include "holder_agent/dataset.h"
#include "holder_agent/holder_metrics.h"
#include "holder_agent/provision_fault.h"
#include "holder_agent/trip_freshness.h"
#include "keyxfer/attested_channel.h"
#include "keyxfer/attester.h"
#include "proto/holder.grpc.pb.h"
#include "trainer/training_policy.h"

namespace gputravel {

// Attested channels opened (OpenChannel) and not yet claimed by a Provision:
// at most kMaxPendingChannels are kept, the oldest dropped first to make room,
// and one older than kPendingChannelLifetime is dropped at the next
// OpenChannel. A dropped channel's ECDH secret is zeroized (SecretBytes).
//
// The lifetime must stay well above the orchestrator's: it uses a channel
// prepared ahead only while it is younger than kPreparedChannelLifetime
// (30 s, orchestrator/trip_runner.h), then routes the GPU out and sends the
// Provision. A Provision claims its channel as it arrives, before waiting
// behind another trip, so the wait for the GPU does not count. Twenty times
// the orchestrator's lifetime leaves a wide margin for a slow route-out; a
// channel older than that was abandoned (the orchestrator restarted, or
// re-made its evidence) and only held memory and a secret.
inline constexpr size_t kMaxPendingChannels = 16;
inline constexpr std::chrono::seconds kPendingChannelLifetime{600};

struct HolderOptions {
  std::string name;            // holder name, bound into every hand-off
  std::string dataset_name;    // what campaigns call this holder's dataset
  std::string domain;          // TD the MUX routes the GPU to for this holder
  std::string device_endpoint; // the GPU as seen from this TD
  // The only orchestrator identities (certificate names, role orchestrator)
  // this agent answers; any other orchestrator certificate of the campaign CA
  // is refused. Empty: no one is answered.
  std::set<std::string> orchestrator_names;
  H2dWriterOptions writer;     // bounce ring, threads (chunk size comes per trip)
  double progress_interval_seconds = 0.25;  // Provision progress messages
  // What this holder allows to be done with its windows and reported about
  // them (trainer/training_policy.h): reported in GetInfo, and every
  // hand-off's terms and window are checked against it.
  v1::TrainingPolicy training_policy = DefaultTrainingPolicy();
  // The last trip accepted per orchestrator and GPU, on disk
  // (trip_freshness.h). Required: without it every hand-off is refused.
  std::shared_ptr<TripFreshness> freshness;
  // Where Provision outcomes are counted (metrics_listen); null: nowhere.
  const HolderMetrics* metrics = nullptr;
  // The clock pending channels' ages are read on (kPendingChannelLifetime);
  // tests pass one they move forward.
  std::function<std::chrono::steady_clock::time_point()> clock = std::chrono::steady_clock::now;
};

// The data-holder agent: answers attested channel requests, accepts one
// hand-off per channel, provisions its dataset window onto the GPU and drops
// the key. It trusts nothing from the host: the hand-off is opened only after
// the orchestrator's evidence verified, and only if bound to this holder.
// Every RPC is refused unless the caller's certificate has the role
// "orchestrator" (auth/authorize.h) and a name in orchestrator_names.
class HolderService final : public v1::HolderAgent::Service {
 public:
  HolderService(HolderOptions options, std::unique_ptr<Dataset> dataset,
                Attester* attester, Verifier* verifier);
  ~HolderService() override;

  grpc::Status GetInfo(grpc::ServerContext*, const v1::GetInfoRequest*,
                       v1::HolderInfo* out) override;
  grpc::Status OpenChannel(grpc::ServerContext*, const v1::OpenChannelRequest* req,
                           v1::OpenChannelResponse* out) override;
  grpc::Status Provision(grpc::ServerContext* ctx, const v1::ProvisionRequest* req,
                         grpc::ServerWriter<v1::ProvisionUpdate>* out) override;

  // Removes the bounce ring file the agent keeps between trips (at shutdown:
  // the daemon exits without running destructors).
  void RemoveBounceRing() { bounce_pool_.RemoveKeptRing(); }

 private:
  // The caller is one of the orchestrators this agent names.
  grpc::Status AuthorizeOrchestrator(const grpc::ServerContext& ctx,
                                     Identity* caller = nullptr) const;
  // `progress(bytes)` is called from the encryption threads as chunks are
  // mapped or read; it returns false once the caller has gone (cancel), and
  // so does `cancelled()`, which the watcher below also polls.
  // What a Provision came to. On failure `fault` says whose side failed
  // (provision_fault.h): the holder's own (its policy, a hand-off for
  // another holder), the device path (the write failed while the dataset
  // did not), or neither for certain (its disk, and so its dataset's size,
  // is the host's). `accepted`: every check passed and the keys were opened.
  // `bytes` and `seconds` of a window written.
  struct ProvisionResult {
    ProvisionFault fault = ProvisionFault::kNone;
    bool accepted = false;
    uint64_t bytes = 0;
    double seconds = 0;
  };
  // Returns the report, sealed under the channel's report key.
  // `orchestrator`: the caller's certificate name (freshness is kept per
  // orchestrator and GPU).
  absl::StatusOr<std::string> DoProvision(
      const std::string& orchestrator, const v1::ProvisionRequest& req,
      const std::function<bool(uint64_t)>& progress,
      const std::function<bool()>& cancelled, ProvisionResult* result);

  // How long the write in progress has waited on the device (zero when no
  // write runs).
  absl::Duration DeviceWait();

  // Cancels the write in progress once its caller has gone. A write waiting
  // on a stalled device reads no chunk, so the source's check would not see
  // the cancel before the write's deadline (minutes for a large window);
  // meanwhile the key stays in memory and the next trip waits. One thread
  // for the agent's life, asleep between writes, polling every 100 ms
  // during one.
  void WatchForCancel();
  bool WatcherHasWork() const ABSL_SHARED_LOCKS_REQUIRED(watch_mu_) {
    return stopping_ || watched_ != nullptr;
  }

  const HolderOptions options_;
  const std::unique_ptr<Dataset> dataset_;
  Attester* const attester_;
  Verifier* const verifier_;
  // One channel to the GPU for every trip (connection set-up is per-trip cost).
  const std::shared_ptr<grpc::Channel> device_;
  // One bounce ring for every trip (creating a ring is per-trip cost too);
  // it holds ciphertext only.
  BouncePool bounce_pool_;

  absl::Mutex mu_;
  // Channels opened but not yet used; each is consumed by one Provision.
  struct PendingChannel {
    std::unique_ptr<ChannelResponder> responder;  // holds the ECDH secret
    std::chrono::steady_clock::time_point opened;
  };
  std::map<std::string, PendingChannel> pending_ ABSL_GUARDED_BY(mu_);
  absl::Mutex provision_mu_;  // one provisioning at a time

  absl::Mutex watch_mu_;
  H2dWriter* watched_ ABSL_GUARDED_BY(watch_mu_) = nullptr;  // the write in progress
  std::function<bool()> watched_cancelled_ ABSL_GUARDED_BY(watch_mu_);
  bool stopping_ ABSL_GUARDED_BY(watch_mu_) = false;
  std::thread watcher_;  // last: started once everything above exists
};

}  // namespace gputravel

#endif  // GPUTRAVEL_HOLDER_AGENT_HOLDER_SERVICE_H_
