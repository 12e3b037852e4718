#ifndef GPUTRAVEL_ORCHESTRATOR_TRAINER_SERVICE_H_
#define GPUTRAVEL_ORCHESTRATOR_TRAINER_SERVICE_H_

// The Trainer service (proto/trainer.proto): how a training process in the
// orchestrator's TD takes a campaign's windows. Served on the daemon's
// trainer_listen (a Unix socket only), mTLS with the campaign CA; the role
// gate (TrainerServiceRoles) admits role "trainer" only, before a request is
// read, and every call then checks that the caller's name is the campaign's
// trainer.identity.

#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "auth/role_gate.h"
#include "orchestrator/trainer_registry.h"
#include "proto/trainer.grpc.pb.h"
#include "util/server_limits.h"

namespace gputravel {

// What the service needs to know of a campaign.
struct TrainerCampaignInfo {
  std::string trainer_kind;  // the spec's trainer.kind
  std::string identity;      // the spec's trainer.identity ("" unless external)
  std::string state;         // kCampaign* (orchestrator/state_store.h)
  std::string error;         // the campaign's error, if any
  // Which campaign of that name (its request id and creation time): a name
  // deleted and created again is another campaign.
  std::string instance;
};
// NotFound for an unknown campaign.
using TrainerCampaignLookup =
    std::function<absl::StatusOr<TrainerCampaignInfo>(const std::string& campaign)>;

class TrainerServiceImpl final : public v1::Trainer::Service {
 public:
  TrainerServiceImpl(TrainerCampaignLookup lookup, TrainerRegistry* registry)
      : lookup_(std::move(lookup)), registry_(registry) {}

  // Ends open Attach streams (CANCELLED) and refuses new ones: the daemon
  // calls it before it stops serving.
  void Shutdown();

  grpc::Status Attach(grpc::ServerContext* ctx, const v1::AttachRequest* req,
                      grpc::ServerWriter<v1::TrainerMessage>* writer) override;
  grpc::Status ReportWindow(grpc::ServerContext* ctx, const v1::WindowReport* req,
                            v1::WindowCommitted* out) override;
  grpc::Status ReleaseLease(grpc::ServerContext* ctx, const v1::LeaseReleased* req,
                            v1::LeaseReleasedAck* out) override;

 private:
  // The caller must be role trainer named as `campaign`'s trainer.identity,
  // and the campaign of kind "external". Fills `info`.
  grpc::Status Admit(grpc::ServerContext* ctx, const std::string& campaign,
                     TrainerCampaignInfo* info);
  // Admit, and the campaign's RemoteTrainer now (FAILED_PRECONDITION when
  // it is not running).
  grpc::Status AdmitRunning(grpc::ServerContext* ctx, const std::string& campaign,
                            std::shared_ptr<RemoteTrainer>* trainer);
  // The campaign's RemoteTrainer, waiting while the campaign exists but does
  // not run (null with `*end` set: the stream ends with it, also when the
  // campaign stops being the one `admitted` describes: deleted and created
  // again under its name).
  std::shared_ptr<RemoteTrainer> WaitForTrainer(grpc::ServerContext* ctx,
                                                const std::string& campaign,
                                                const TrainerCampaignInfo& admitted,
                                                grpc::Status* end);
  bool stopping();
  // Counts an Attach stream of `caller` on `campaign` while it lasts (each
  // holds a server thread, attached or waiting): RESOURCE_EXHAUSTED beyond
  // kMaxAttachesPerCampaign on one campaign (one, and a reconnect whose old
  // stream's end is not noticed yet) or kMaxAttachesPerCaller of one caller.
  grpc::Status EnterAttach(const std::string& caller, const std::string& campaign);
  void LeaveAttach(const std::string& caller, const std::string& campaign);

  const TrainerCampaignLookup lookup_;
  TrainerRegistry* const registry_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, int> attaches_by_campaign_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> attaches_by_caller_ ABSL_GUARDED_BY(mu_);
};

inline constexpr int kMaxAttachesPerCampaign = 2;
inline constexpr int kMaxAttachesPerCaller = 8;

// Role "trainer" for every method of the service (auth/role_gate.h).
MethodRoles TrainerServiceRoles();
// Bounds of the trainer listener: few streams, batches of up to 16 Mi
// tokens (32 MiB) out, small reports in.
ServerLimits TrainerServiceLimits();

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_TRAINER_SERVICE_H_
