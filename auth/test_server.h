#ifndef GPUTRAVEL_AUTH_TEST_SERVER_H_
#define GPUTRAVEL_AUTH_TEST_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "auth/identity.h"
#include "auth/tls_config.h"
#include "grpcpp/grpcpp.h"
#include "proto/holder.grpc.pb.h"
#include "util/test_dir.h"

namespace gputravel {

// Test-only helpers for the auth/ tests: a test PKI and a real gRPC server
// whose methods run the authorization checks (TempDir, which the tests make
// them in, is util/test_dir.h's).

// Creates a campaign CA in `dir` and issues every identity in `ids`.
absl::Status MakeTestPki(const std::string& dir, const std::vector<Identity>& ids);
// The ca/cert/key paths of `id` in a PKI directory.
TlsFiles TestFiles(const std::string& dir, const Identity& id);

// v1::HolderAgent whose GetInfo (the only method used, to stay independent of
// the rest of the holder API) runs one check and answers with the caller's
// identity: HolderInfo.name = caller name, HolderInfo.domain = caller role.
//  - Roles mode: Authorize(ctx, allowed_roles).
//  - Self mode: AuthorizeSelf(ctx, "holder", X) where X is the client
//    metadata "act-as" (the holder the caller claims to act for).
class AuthProbeService final : public v1::HolderAgent::Service {
 public:
  explicit AuthProbeService(std::vector<std::string> allowed_roles)
      : allowed_roles_(std::move(allowed_roles)) {}
  static std::unique_ptr<AuthProbeService> SelfMode() {
    auto s = std::make_unique<AuthProbeService>(std::vector<std::string>{});
    s->self_mode_ = true;
    return s;
  }
  grpc::Status GetInfo(grpc::ServerContext* ctx, const v1::GetInfoRequest*,
                       v1::HolderInfo* out) override;

 private:
  std::vector<std::string> allowed_roles_;
  bool self_mode_ = false;
};

// A started server on `address` ("unix:/path" or "127.0.0.1:0").
struct RunningServer {
  std::unique_ptr<grpc::Service> service;
  std::unique_ptr<grpc::Server> server;
  std::string endpoint;  // What a client dials (port filled in for ":0").
  ~RunningServer();
};
absl::StatusOr<std::unique_ptr<RunningServer>> StartServer(
    const std::string& address, std::shared_ptr<grpc::ServerCredentials> creds,
    std::unique_ptr<grpc::Service> service);

}  // namespace gputravel

#endif  // GPUTRAVEL_AUTH_TEST_SERVER_H_
