#ifndef GPUTRAVEL_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_
#define GPUTRAVEL_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_

#include "orchestrator/campaign_engine.h"
#include "proto/orchestrator.grpc.pb.h"

namespace gputravel {

// The scheduler/operator API (proto/orchestrator.proto) over the engine.
// Authorization by certificate role: operators and schedulers may call
// everything; a holder may only list its own holder rows (it acts only as
// itself); every other caller is refused. Nothing here returns key material
// or dataset bytes.
class OrchestratorService final : public v1::Orchestrator::Service {
 public:
  explicit OrchestratorService(CampaignEngine* engine) : engine_(engine) {}

  grpc::Status CreateCampaign(grpc::ServerContext* ctx, const v1::CreateCampaignRequest* req,
                              v1::CreateCampaignResponse* out) override;
  grpc::Status GetCampaign(grpc::ServerContext* ctx, const v1::GetCampaignRequest* req,
                           v1::Campaign* out) override;
  grpc::Status ListCampaigns(grpc::ServerContext* ctx, const v1::ListCampaignsRequest* req,
                             v1::ListCampaignsResponse* out) override;
  grpc::Status StartCampaign(grpc::ServerContext* ctx, const v1::CampaignRef* req,
                             v1::Campaign* out) override;
  grpc::Status PauseCampaign(grpc::ServerContext* ctx, const v1::CampaignRef* req,
                             v1::Campaign* out) override;
  grpc::Status ResumeCampaign(grpc::ServerContext* ctx, const v1::CampaignRef* req,
                              v1::Campaign* out) override;
  grpc::Status CancelCampaign(grpc::ServerContext* ctx, const v1::CampaignRef* req,
                              v1::Campaign* out) override;
  grpc::Status SkipHolder(grpc::ServerContext* ctx, const v1::SkipHolderRequest* req,
                          v1::Campaign* out) override;
  grpc::Status WatchCampaign(grpc::ServerContext* ctx, const v1::WatchCampaignRequest* req,
                             grpc::ServerWriter<v1::Event>* out) override;
  grpc::Status ListHolders(grpc::ServerContext* ctx, const v1::ListHoldersRequest* req,
                           v1::ListHoldersResponse* out) override;
  grpc::Status DeleteCampaign(grpc::ServerContext* ctx, const v1::CampaignRef* req,
                              v1::DeleteCampaignResponse* out) override;
  grpc::Status CheckHolder(grpc::ServerContext* ctx, const v1::CheckHolderRequest* req,
                           v1::HolderCheck* out) override;
  grpc::Status ListGpus(grpc::ServerContext* ctx, const v1::ListCampaignGpusRequest* req,
                        v1::ListCampaignGpusResponse* out) override;

 private:
  // Fills `out` from the store (holders always, trips on request), its state
  // and error as the engine shows them (CampaignEngine::storage()).
  grpc::Status Fill(const CampaignRow& row, bool include_trips, v1::Campaign* out);

  CampaignEngine* const engine_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_
