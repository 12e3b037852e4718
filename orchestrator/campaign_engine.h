#ifndef GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_ENGINE_H_
#define GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_ENGINE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/channel.h"
#include "keyxfer/attester.h"
#include "orchestrator/api_limits.h"
#include "orchestrator/campaign_changes.h"
#include "orchestrator/campaign_spec.h"
#include "orchestrator/daemon_config.h"
#include "orchestrator/gpu_health.h"
#include "orchestrator/holder_check.h"
#include "orchestrator/state_store.h"
#include "orchestrator/storage_backoff.h"
#include "orchestrator/trainer_registry.h"
#include "orchestrator/trainer_service.h"
#include "orchestrator/trip_runner.h"
#include "proto/holder.grpc.pb.h"
#include "proto/mux.grpc.pb.h"
#include "proto/orchestrator.pb.h"
#include "trainer/data_loader.h"

namespace gputravel {

// Live provisioning progress of a campaign's current trip (not durable).
struct LiveProgress {
  uint64_t trip = 0;
  std::string holder;
  uint64_t bytes = 0;
  uint64_t total = 0;
  uint64_t version = 0;  // increases with every update
};

// The campaign engine: one worker thread per GPU runs the campaigns assigned
// to it, trip after trip, committing every step to the StateStore before its
// side effect (P7). At start-up, and whenever a trip could not be made safe,
// a worker first brings every unfinished trip of its GPU to a safe state:
// route home with a fresh fencing token, fresh key agreement (the holder's
// key dies), scrub and verify the buffer; a trip whose training was already
// committed is then counted as done, any other is aborted and its window
// planned again under a new trip id. So a window is trained at most once and
// every trip is counted exactly once.
//
// While the state database cannot be written (a full disk), nothing may
// happen that would need a commit: the workers leave the GPU alone and
// retry the storage with a growing delay (orchestrator/storage_backoff.h),
// then make the interrupted trip safe and go on by themselves.
//
// The API methods are thread-safe and return quickly; the work happens on
// the workers. Events are committed to the store; changes() lets a watcher
// block until its campaign commits something new or its live progress moves.
class CampaignEngine {
 public:
  CampaignEngine(const OrchestratorConfig* config, StateStore* store, Attester* attester,
                 Verifier* verifier);
  ~CampaignEngine();

  // Starts the GPU workers.
  absl::Status Start();
  // Stops the workers. A trip in flight is cancelled and made safe (it is
  // aborted and will be planned again); campaigns keep their state, so a
  // restart continues them.
  void Shutdown();

  // Validates the spec (field-named errors), asks every holder who it is and
  // what it serves (the holder must be reachable, authenticate as itself and
  // serve the named dataset), then records the campaign (idempotent on
  // request_id).
  absl::StatusOr<CreateResult> Create(const std::string& request_id,
                                      const std::string& spec_json);
  // Preflight of a holder no campaign need name yet (orchestrator/
  // holder_check.h CheckHolder): reachable as itself, serving what it is
  // asked, in its TD, with evidence this orchestrator's policy accepts.
  // INVALID_ARGUMENT for a malformed name, endpoint or empty domain.
  absl::StatusOr<v1::HolderCheck> CheckHolder(const v1::CheckHolderRequest& req);
  absl::StatusOr<CampaignRow> StartCampaign(const std::string& name);
  // Removes a final campaign so its name can be used again (StateStore::
  // DeleteCampaign); `who` is the caller, recorded.
  absl::Status DeleteCampaign(const std::string& name, const std::string& who);
  absl::StatusOr<CampaignRow> Pause(const std::string& name);
  absl::StatusOr<CampaignRow> Resume(const std::string& name);
  absl::StatusOr<CampaignRow> Cancel(const std::string& name);
  // Takes active holder `holder` of PAUSED campaign `name` out for good
  // (proto SkipHolder); `who` (the caller) and `reason` are recorded.
  // FAILED_PRECONDITION while a trip of the campaign is still in flight.
  absl::StatusOr<CampaignRow> SkipHolder(const std::string& name, const std::string& holder,
                                         const std::string& reason, const std::string& who);

  // True once Shutdown began (watch streams end).
  bool stopping();
  // The campaign's live progress (version 0 when there is none).
  LiveProgress Progress(const std::string& campaign);
  // GPU name -> campaign currently running on it ("" when idle).
  std::map<std::string, std::string> GpuAssignments();
  // What the API shows of one configured GPU (ListGpus).
  struct GpuView {
    GpuConfig config;
    std::string campaign;  // running on it now ("" when idle)
    GpuHealth health;
    // Bytes of the dataset buffers this orchestrator's campaigns hold on the
    // device met (health.serial).
    uint64_t held_bytes = 0;
    // RUNNING campaigns waiting for it, in the order they will get it.
    std::vector<std::string> queue;
  };
  // Every configured GPU, in configuration order.
  absl::StatusOr<std::vector<GpuView>> GpuViews();

  StateStore* store() { return store_; }
  // The campaigns an external trainer may attach to now (the Trainer
  // service's), and what the service needs to know of a campaign.
  TrainerRegistry* trainers() { return &trainers_; }
  absl::StatusOr<TrainerCampaignInfo> TrainerInfo(const std::string& campaign);
  // Per-campaign changes that watch streams wait on (and their bound).
  CampaignChanges* changes() { return &changes_; }
  // A state database that cannot be written, as the API shows it
  // (StorageBackoff::Show).
  const StorageBackoff& storage() const { return storage_; }
  const OrchestratorConfig& config() const { return *config_; }

 private:
  struct Gpu;

  void Worker(Gpu* gpu);
  // While the storage fails: waits for the next probe (at most a second, or
  // until Shutdown) and runs it if no other worker does.
  void AwaitStorage();
  // Once the storage works again: the event for the campaign the storage
  // failure stopped on `gpu`, and the states its worker could not commit.
  // False if the storage failed again.
  bool AfterStorageFailure(Gpu* gpu);
  // Runs the campaign until it is not RUNNING any more.
  void RunCampaign(Gpu* gpu, const std::string& name, GpuSession* session,
                   TripRunner* runner);
  std::optional<std::string> PickCampaign(const std::string& gpu);
  // PAUSING -> PAUSED for the campaigns of `gpu`, whose worker runs none.
  void FinishPausing(const std::string& gpu);
  // Records on health_ the outcome of a contact with `gpu`'s device.
  void NoteContact(const Gpu& gpu, const GpuSession& session, const absl::Status& outcome);
  // A MUX or a GPU (`gpu`'s device) restarted since the last call is tried
  // at once when the GPU is brought home, not after the channel's reconnect
  // backoff (which grows to minutes while a daemon stays down).
  void RetryNow(const Gpu& gpu);
  absl::StatusOr<std::unique_ptr<v1::HolderAgent::Stub>> HolderStub(const HolderSpec& h);
  absl::StatusOr<CampaignSpec> SpecOf(const CampaignRow& row);
  SpecOptions MakeSpecOptions() const;
  // Publishes committed events (wakes watchers) and logs failures to commit.
  void Notify(const absl::StatusOr<EventSeqs>& seqs);
  void SetProgress(const std::string& campaign, uint64_t trip, const std::string& holder,
                   uint64_t bytes, uint64_t total);
  void ClearProgress(const std::string& campaign);
  void Wake();

  const OrchestratorConfig* const config_;
  HolderCheckLimiter holder_checks_;
  // The held-out set (config eval_tokens), read by Start; empty: none.
  std::vector<uint16_t> eval_tokens_;
  StateStore* const store_;
  Attester* const attester_;
  Verifier* const verifier_;
  std::shared_ptr<grpc::Channel> mux_channel_;
  std::unique_ptr<v1::Mux::Stub> mux_;
  std::vector<std::unique_ptr<Gpu>> gpus_;
  GpuHealthBoard health_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t last_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t progress_version_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t wake_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, LiveProgress> progress_ ABSL_GUARDED_BY(mu_);
  CampaignChanges changes_{kMaxWatchesPerCaller};
  int observer_ = 0;  // the store's event observer that wakes changes_
  TrainerRegistry trainers_;
  StorageBackoff storage_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_ENGINE_H_
