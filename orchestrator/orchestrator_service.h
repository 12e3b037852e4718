#ifndef GPUTRAVEL_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_
#define GPUTRAVEL_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_

#include "orchestrator/campaign_runner.h"
#include "proto/orchestrator.grpc.pb.h"

namespace gputravel {

// The scheduler-facing API of the orchestrator daemon.
class OrchestratorService final : public v1::Orchestrator::Service {
 public:
  explicit OrchestratorService(CampaignRunner* runner) : runner_(runner) {}
  grpc::Status RunCampaign(grpc::ServerContext*, const v1::RunCampaignRequest* req,
                           v1::CampaignReport* out) override {
    *out = runner_->Run(req->campaign());
    return grpc::Status::OK;
  }

 private:
  CampaignRunner* runner_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_
