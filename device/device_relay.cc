#include "device/device_relay.h"

#include <chrono>
#include <thread>

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

grpc::Status DeviceRelay::AttachBounce(grpc::ServerContext*, const v1::AttachBounceRequest* req,
                                       v1::AttachBounceResponse* resp) {
  auto up = Upstream();
  if (up == nullptr) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no upstream yet");
  grpc::ClientContext ctx;
  return up->AttachBounce(&ctx, *req, resp);
}

grpc::Status DeviceRelay::DetachBounce(grpc::ServerContext*, const v1::DetachBounceRequest* req,
                                       v1::DetachBounceResponse* resp) {
  auto up = Upstream();
  if (up == nullptr) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no upstream yet");
  grpc::ClientContext ctx;
  return up->DetachBounce(&ctx, *req, resp);
}

grpc::Status DeviceRelay::SubmitH2D(grpc::ServerContext* sctx, const v1::SubmitH2DRequest* req,
                                    v1::SubmitH2DResponse* resp) {
  if (hold_doorbells_) {
    ++held_;
    // Kept from the device: the caller waits until it gives up.
    for (int i = 0; i < 6000 && !sctx->IsCancelled(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return grpc::Status(grpc::StatusCode::CANCELLED, "held");
  }
  auto up = Upstream();
  if (up == nullptr) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no upstream yet");
  grpc::ClientContext ctx;
  return up->SubmitH2D(&ctx, *req, resp);
}

grpc::Status DeviceRelay::SubmitH2DStream(
    grpc::ServerContext* sctx,
    grpc::ServerReaderWriter<v1::SubmitH2DAck, v1::SubmitH2DRequest>* stream) {
  auto up = Upstream();
  if (up == nullptr) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no upstream yet");
  grpc::ClientContext ctx;
  auto upstream = up->SubmitH2DStream(&ctx);
  std::thread acks([&] {
    v1::SubmitH2DAck ack;
    while (upstream->Read(&ack)) {
      if (!stream->Write(ack)) break;
    }
  });
  v1::SubmitH2DRequest req;
  bool held = false;
  while (stream->Read(&req)) {
    if (hold_doorbells_) {
      ++held_;  // the device never hears of this chunk
      held = true;
      continue;
    }
    if (!upstream->Write(req)) break;
  }
  // Chunks kept back: the writer waits for their acks, and neither the
  // device nor the writer learns that the stream is over until it gives up.
  for (int i = 0; held && i < 6000 && !sctx->IsCancelled(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (sctx->IsCancelled() || held) ctx.TryCancel();
  upstream->WritesDone();
  acks.join();
  return upstream->Finish();
}

}  // namespace gputravel
