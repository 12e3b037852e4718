#include "util/server_limits.h"

namespace gputravel {

void ApplyServerLimits(const ServerLimits& limits, const std::string& name,
                       grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(limits.max_receive_bytes);
  builder->SetMaxSendMessageSize(limits.max_send_bytes);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, limits.max_concurrent_streams);
  grpc::ResourceQuota quota(name);
  if (limits.quota_bytes > 0) quota.Resize(static_cast<size_t>(limits.quota_bytes));
  quota.SetMaxThreads(limits.max_threads);
  builder->SetResourceQuota(quota);
}

}  // namespace gputravel
