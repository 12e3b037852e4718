#include "orchestrator/api_limits.h"

#include "auth/identity.h"

namespace gputravel {

ServerLimits OrchestratorApiLimits() {
  ServerLimits l;
  l.max_receive_bytes = kOrchestratorMaxRequestBytes;
  l.max_send_bytes = kMaxMessageBytes;
  l.max_concurrent_streams = 32;
  l.quota_bytes = int64_t{kOrchestratorQuotaMiB} << 20;
  l.max_threads = 64;
  return l;
}

MethodRoles OrchestratorApiRoles() {
  const std::vector<std::string> control = {kRoleOperator, kRoleScheduler};
  MethodRoles m;
  for (const char* method : {"CreateCampaign", "GetCampaign", "ListCampaigns", "StartCampaign",
                             "PauseCampaign", "ResumeCampaign", "CancelCampaign",
                             "WatchCampaign", "ListGpus", "CheckHolder"}) {
    m[std::string("/gputravel.v1.Orchestrator/") + method] = control;
  }
  m["/gputravel.v1.Orchestrator/ListHolders"] = {kRoleOperator, kRoleScheduler, kRoleHolder};
  m["/gputravel.v1.Orchestrator/SkipHolder"] = {kRoleOperator};
  m["/gputravel.v1.Orchestrator/DeleteCampaign"] = {kRoleOperator};
  m["/grpc.health.v1.Health/*"] = control;
  m["/grpc.reflection.v1alpha.ServerReflection/*"] = control;
  m["/grpc.reflection.v1.ServerReflection/*"] = control;
  return m;
}

}  // namespace gputravel
