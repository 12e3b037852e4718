#include "vfio_mux/emulated_backend.h"

#include <chrono>

#include "util/grpc_status.h"
#include "util/log.h"
#include "vfio_mux/mux_policy.h"

namespace gputravel {

EmulatedBackend::EmulatedBackend(std::map<std::string, std::string> admin_endpoints,
                                 std::set<std::string> domains)
    : domains_(std::move(domains)) {
  for (const auto& e : admin_endpoints) {
    stubs_[e.first] = v1::DeviceAdmin::NewStub(MakeChannel(e.second));
  }
}

absl::StatusOr<std::vector<GpuDevice>> EmulatedBackend::ListGpus() {
  std::vector<GpuDevice> out;
  for (const auto& s : stubs_) out.push_back(GpuDevice{s.first, "", "", "emulated"});
  return out;
}

absl::StatusOr<v1::DeviceAdmin::Stub*> EmulatedBackend::StubFor(const std::string& gpu) {
  auto it = stubs_.find(gpu);
  if (it == stubs_.end()) return absl::NotFoundError("unknown emulated GPU '" + gpu + "'");
  return it->second.get();
}

absl::Status EmulatedBackend::Move(const std::string& gpu, const std::string& from,
                                   const std::string& to) {
  if (!to.empty() && domains_.count(to) == 0) return DomainNotConfigured(to);
  auto stub = StubFor(gpu);
  if (!stub.ok()) return stub.status();
  GT_LOG(3, "emulated GPU ", gpu, ": owner '", from, "' -> '", to, "'");
  v1::SetOwnerRequest req;
  req.set_domain(to);
  v1::SetOwnerResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  absl::Status s = FromGrpc((*stub)->SetOwner(&ctx, req, &resp),
                            "emulated GPU " + gpu + " SetOwner");
  if (!s.ok()) return s;
  // Confirm from the status the device read back after the change, as the
  // real backends read the kernel or libvirt back: one round trip per move.
  const v1::DeviceStatus* st = &resp.status();
  v1::DeviceStatus asked;
  if (!resp.has_status()) {
    // A device that does not report its status with SetOwner: ask.
    grpc::ClientContext ctx2;
    ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    s = FromGrpc((*stub)->GetStatus(&ctx2, {}, &asked), "emulated GPU " + gpu + " GetStatus");
    if (!s.ok()) return s;
    st = &asked;
  }
  if (st->owner() != to) {
    return absl::InternalError("emulated GPU " + gpu + " reports owner '" + st->owner() +
                               "' after a move from '" + from + "' to '" + to + "'");
  }
  return absl::OkStatus();
}

absl::Status EmulatedBackend::Reset(const std::string& gpu) {
  auto stub = StubFor(gpu);
  if (!stub.ok()) return stub.status();
  v1::ResetResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return FromGrpc((*stub)->Reset(&ctx, {}, &resp), "emulated GPU " + gpu + " Reset");
}

}  // namespace gputravel
