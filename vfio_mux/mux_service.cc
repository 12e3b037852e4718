#include "vfio_mux/mux_service.h"

#include "auth/authorize.h"

#include "util/grpc_status.h"
#include "util/log.h"

namespace gputravel {

void MuxService::Fill(const std::string& gpu, const gputravel::Route& r,
                      v1::GpuRoute* out) const {
  out->set_gpu(gpu);
  out->set_domain(r.domain);
  out->set_fencing_token(r.fencing_token);
  out->set_backend(backend_name_);
}

grpc::Status MuxService::ListGpus(grpc::ServerContext* ctx, const v1::ListGpusRequest*,
                                  v1::ListGpusResponse* out) {
  grpc::Status auth = Authorize(*ctx, {kRoleOrchestrator, kRoleOperator});
  if (!auth.ok()) return auth;
  for (const auto& r : table_->All()) Fill(r.first, r.second, out->add_gpus());
  return grpc::Status::OK;
}

grpc::Status MuxService::Route(grpc::ServerContext* ctx, const v1::RouteRequest* req,
                               v1::RouteResponse* out) {
  grpc::Status auth = Authorize(*ctx, {kRoleOrchestrator});
  if (!auth.ok()) return auth;
  auto r = table_->RouteTo(req->gpu(), req->domain(), req->fencing_token());
  if (!r.ok()) {
    GT_LOG(0, "route ", req->gpu(), " -> '", req->domain(), "' refused: ", r.status().message());
    return ToGrpc(r.status());
  }
  GT_LOG(1, "routed ", req->gpu(), " -> '", req->domain(), "' (token ", req->fencing_token(), ")");
  Fill(req->gpu(), *r, out->mutable_route());
  return grpc::Status::OK;
}

grpc::Status MuxService::GetRoute(grpc::ServerContext* ctx, const v1::GetRouteRequest* req,
                                  v1::GpuRoute* out) {
  grpc::Status auth = Authorize(*ctx, {kRoleOrchestrator, kRoleOperator});
  if (!auth.ok()) return auth;
  auto r = table_->Get(req->gpu());
  if (!r.ok()) return ToGrpc(r.status());
  Fill(req->gpu(), *r, out);
  return grpc::Status::OK;
}

grpc::Status MuxService::Reset(grpc::ServerContext* ctx, const v1::ResetGpuRequest* req,
                               v1::ResetGpuResponse*) {
  grpc::Status auth = Authorize(*ctx, {kRoleOrchestrator});
  if (!auth.ok()) return auth;
  absl::Status s = table_->Reset(req->gpu(), req->fencing_token());
  GT_LOG(1, "reset ", req->gpu(), ": ", s.ok() ? "ok" : std::string(s.message()));
  return ToGrpc(s);
}

}  // namespace gputravel
