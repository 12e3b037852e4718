#ifndef GPUTRAVEL_VFIO_MUX_MUX_SERVICE_H_
#define GPUTRAVEL_VFIO_MUX_MUX_SERVICE_H_

#include <string>

#include "proto/mux.grpc.pb.h"
#include "vfio_mux/mux_callers.h"
#include "vfio_mux/mux_metrics.h"
#include "vfio_mux/route_table.h"

namespace gputravel {

// The MUX's gRPC API over a RouteTable. Callers authenticate with mTLS and
// must present a certificate the host's administrator pinned (MuxCallers):
// routing and resets need the role "orchestrator"; reading routes also allows
// "operator". Errors returned to a caller name nothing of the host beyond the
// request's own GPU, domain and token (vfio_mux/mux_policy.h); the detail,
// escaped, goes to the MUX's log.
class MuxService final : public v1::Mux::Service {
 public:
  // `metrics` (may be null: none) counts every route and reset answered.
  MuxService(RouteTable* table, std::string backend_name, MuxCallers callers,
             const MuxMetrics* metrics = nullptr)
      : table_(table), backend_name_(std::move(backend_name)), callers_(std::move(callers)),
        metrics_(metrics) {}

  grpc::Status ListGpus(grpc::ServerContext*, const v1::ListGpusRequest*,
                        v1::ListGpusResponse* out) override;
  grpc::Status Route(grpc::ServerContext*, const v1::RouteRequest* req,
                     v1::RouteResponse* out) override;
  grpc::Status GetRoute(grpc::ServerContext*, const v1::GetRouteRequest* req,
                        v1::GpuRoute* out) override;
  grpc::Status Reset(grpc::ServerContext*, const v1::ResetGpuRequest* req,
                     v1::ResetGpuResponse*) override;

 private:
  void Fill(const std::string& gpu, const gputravel::Route& r, v1::GpuRoute* out) const;
  RouteTable* table_;
  std::string backend_name_;
  const MuxCallers callers_;
  const MuxMetrics* const metrics_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_MUX_SERVICE_H_
