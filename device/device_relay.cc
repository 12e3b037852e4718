#include "device/device_relay.h"

#include "util/grpc_status.h"

namespace gputravel {

DeviceRelay::DeviceRelay(std::string upstream) {
  if (!upstream.empty()) SetUpstream(upstream);
}

void DeviceRelay::SetUpstream(const std::string& upstream) {
  absl::MutexLock l(&mu_);
  upstream_ = v1::Device::NewStub(MakeChannel(upstream));
}

void DeviceRelay::AnswerControlWith(grpc::StatusCode code, int after_exchanges) {
  absl::MutexLock l(&mu_);
  code_ = code;
  exchanges_left_ = after_exchanges;
}

std::shared_ptr<v1::Device::Stub> DeviceRelay::Upstream() {
  absl::MutexLock l(&mu_);
  return upstream_;
}

grpc::Status DeviceRelay::GetIdentity(grpc::ServerContext*, const v1::GetIdentityRequest* req,
                                      v1::DeviceIdentity* resp) {
  auto up = Upstream();
  if (up == nullptr) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no upstream yet");
  grpc::ClientContext ctx;
  return up->GetIdentity(&ctx, *req, resp);
}

grpc::Status DeviceRelay::KeyExchange(grpc::ServerContext*, const v1::KeyExchangeRequest* req,
                                      v1::KeyExchangeResponse* resp) {
  auto up = Upstream();
  if (up == nullptr) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no upstream yet");
  grpc::ClientContext ctx;
  grpc::Status st = up->KeyExchange(&ctx, *req, resp);
  absl::MutexLock l(&mu_);
  if (exchanges_left_ > 0) --exchanges_left_;
  return st;
}

grpc::Status DeviceRelay::Control(grpc::ServerContext*, const v1::SealedMessage* req,
                                  v1::SealedMessage* resp) {
  {
    absl::MutexLock l(&mu_);
    if (code_ != grpc::StatusCode::OK && exchanges_left_ == 0) {
      ++faked_;
      return grpc::Status(code_, "no such buffer");
    }
  }
  auto up = Upstream();
  if (up == nullptr) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no upstream yet");
  grpc::ClientContext ctx;
  return up->Control(&ctx, *req, resp);
}

}  // namespace gputravel
