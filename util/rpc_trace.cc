#include "util/rpc_trace.h"

#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "util/log.h"

namespace gputravel {
namespace {

// Who called: the transport's peer address and, over mTLS, the common name
// of the certificate it presented (public: it is in the certificate).
std::string Caller(grpc::ServerContextBase* ctx) {
  if (ctx == nullptr) return "?";
  std::string who = ctx->peer();
  std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
  if (auth != nullptr) {
    for (const grpc::string_ref& cn : auth->FindPropertyValues("x509_common_name")) {
      who += " cn=" + std::string(cn.data(), cn.size());
      break;
    }
  }
  return who;
}

class RpcTraceInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit RpcTraceInterceptor(grpc::experimental::ServerRpcInfo* info)
      : info_(info),
        method_(info->method() != nullptr ? info->method() : "?"),
        start_(absl::Now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    // The peer and its certificate are known once the call's metadata is in.
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      GT_LOG(3, "rpc ", method_, " from ", Caller(info_->server_context()), " begins");
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status s = methods->GetSendStatus();
      GT_LOG(3, "rpc ", method_, " ends: ",
             absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code())), " (",
             absl::ToInt64Milliseconds(absl::Now() - start_), " ms)");
    }
    methods->Proceed();
  }

 private:
  grpc::experimental::ServerRpcInfo* const info_;
  const std::string method_;
  const absl::Time start_;
};

class RpcTraceFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RpcTraceInterceptor(info);
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeRpcTraceInterceptorFactory() {
  return std::make_unique<RpcTraceFactory>();
}

}  // namespace gputravel
