#include "vfio_mux/mux_service.h"

#include <chrono>

#include "auth/authorize.h"
#include "util/grpc_status.h"
#include "util/log.h"
#include "vfio_mux/mux_policy.h"

namespace gputravel {
namespace {

// The caller's identity, for log lines ("orchestrator 'orch'").
std::string Caller(const grpc::ServerContext& ctx) {
  auto id = PeerIdentity(ctx);
  return id.ok() ? DescribeIdentity(*id) : "an unidentified caller";
}

// Logs `status` in full (escaped: names and backend texts may hold any
// byte), and returns what the caller may see of it.
grpc::Status Answer(const grpc::ServerContext& ctx, const absl::Status& status,
                    const std::string& what) {
  if (!status.ok()) {
    GT_LOG(0, LogSafe(what), " for ", Caller(ctx), " refused: ", LogSafe(status.ToString()));
  }
  return ToGrpc(CallerView(status, what));
}

}  // namespace

void MuxService::Fill(const std::string& gpu, const gputravel::Route& r,
                      v1::GpuRoute* out) const {
  out->set_gpu(gpu);
  out->set_domain(r.domain);
  out->set_fencing_token(r.fencing_token);
  out->set_backend(backend_name_);
}

grpc::Status MuxService::ListGpus(grpc::ServerContext* ctx, const v1::ListGpusRequest*,
                                  v1::ListGpusResponse* out) {
  grpc::Status auth = callers_.Authorize(*ctx, {kRoleOrchestrator, kRoleOperator});
  if (!auth.ok()) return auth;
  for (const auto& r : table_->All()) Fill(r.first, r.second, out->add_gpus());
  return grpc::Status::OK;
}

grpc::Status MuxService::Route(grpc::ServerContext* ctx, const v1::RouteRequest* req,
                               v1::RouteResponse* out) {
  grpc::Status auth = callers_.Authorize(*ctx, {kRoleOrchestrator});
  if (!auth.ok()) return auth;
  const std::string what =
      "route of GPU " + req->gpu() + " to '" + req->domain() + "'";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = table_->RouteTo(req->gpu(), req->domain(), req->fencing_token());
  if (metrics_ != nullptr) {
    metrics_->Routed(r.status(),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (!r.ok()) return Answer(*ctx, r.status(), what);
  GT_LOG(1, "routed ", req->gpu(), " -> '", req->domain(), "' (token ", req->fencing_token(),
         ")");
  Fill(req->gpu(), *r, out->mutable_route());
  return grpc::Status::OK;
}

grpc::Status MuxService::GetRoute(grpc::ServerContext* ctx, const v1::GetRouteRequest* req,
                                  v1::GpuRoute* out) {
  grpc::Status auth = callers_.Authorize(*ctx, {kRoleOrchestrator, kRoleOperator});
  if (!auth.ok()) return auth;
  auto r = table_->Get(req->gpu());
  if (!r.ok()) return Answer(*ctx, r.status(), "reading the route of GPU " + req->gpu());
  Fill(req->gpu(), *r, out);
  return grpc::Status::OK;
}

grpc::Status MuxService::Reset(grpc::ServerContext* ctx, const v1::ResetGpuRequest* req,
                               v1::ResetGpuResponse*) {
  grpc::Status auth = callers_.Authorize(*ctx, {kRoleOrchestrator});
  if (!auth.ok()) return auth;
  absl::Status s = table_->Reset(req->gpu(), req->fencing_token());
  if (metrics_ != nullptr) metrics_->Reset(s);
  if (s.ok()) GT_LOG(1, "reset ", req->gpu(), " (token ", req->fencing_token(), ")");
  return Answer(*ctx, s, "reset of GPU " + req->gpu());
}

}  // namespace gputravel
