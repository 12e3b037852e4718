#include "auth/test_server.h"

#include <stdlib.h>

#include <chrono>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "auth/authorize.h"
#include "auth/pki.h"

namespace gputravel {

absl::Status MakeTestPki(const std::string& dir, const std::vector<Identity>& ids) {
  absl::Status s = InitCampaignCa(dir, "test", 2);
  if (!s.ok()) return s;
  for (const Identity& id : ids) {
    absl::StatusOr<IssuedFiles> f = IssueIdentity(dir, id, 1);
    if (!f.ok()) return f.status();
  }
  return absl::OkStatus();
}

TlsFiles TestFiles(const std::string& dir, const Identity& id) {
  return TlsFiles{CaCertPath(dir), IdentityCertPath(dir, id), IdentityKeyPath(dir, id)};
}

grpc::Status AuthProbeService::GetInfo(grpc::ServerContext* ctx, const v1::GetInfoRequest*,
                                       v1::HolderInfo* out) {
  Identity caller;
  grpc::Status s;
  if (self_mode_) {
    auto it = ctx->client_metadata().find("act-as");
    std::string as = it == ctx->client_metadata().end()
                         ? ""
                         : std::string(it->second.data(), it->second.size());
    s = AuthorizeSelf(*ctx, "holder", as);
    if (s.ok()) caller = Identity{"holder", as};
  } else if (allowed_roles_.empty()) {
    s = Authorize(*ctx, {}, &caller);
  } else if (allowed_roles_.size() == 1) {
    s = Authorize(*ctx, {allowed_roles_[0].c_str()}, &caller);
  } else if (allowed_roles_.size() == 2) {
    s = Authorize(*ctx, {allowed_roles_[0].c_str(), allowed_roles_[1].c_str()}, &caller);
  } else {
    return grpc::Status(grpc::StatusCode::INTERNAL, "test service supports <= 2 roles");
  }
  if (!s.ok()) return s;
  out->set_name(caller.name);
  out->set_domain(caller.role);
  return grpc::Status::OK;
}

RunningServer::~RunningServer() {
  if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

absl::StatusOr<std::unique_ptr<RunningServer>> StartServer(
    const std::string& address, std::shared_ptr<grpc::ServerCredentials> creds,
    std::unique_ptr<grpc::Service> service) {
  auto out = std::make_unique<RunningServer>();
  out->service = std::move(service);
  int port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort(address, creds, &port);
  b.RegisterService(out->service.get());
  out->server = b.BuildAndStart();
  if (!out->server) return absl::UnavailableError("cannot start a server on " + address);
  out->endpoint = address;
  if (absl::EndsWith(address, ":0")) {
    out->endpoint = absl::StrCat(address.substr(0, address.size() - 1), port);
  }
  return out;
}

}  // namespace gputravel
