#include "device/device_service.h"

#include "util/grpc_status.h"
#include "util/log.h"

namespace gputravel {

template <typename T>
static grpc::Status Fill(absl::StatusOr<T> r, T* out) {
  if (!r.ok()) return ToGrpc(r.status());
  *out = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status DeviceServiceImpl::GetIdentity(grpc::ServerContext*,
                                            const v1::GetIdentityRequest*,
                                            v1::DeviceIdentity* out) {
  return Fill(gpu_->GetIdentity(domain_), out);
}

grpc::Status DeviceServiceImpl::KeyExchange(grpc::ServerContext*,
                                            const v1::KeyExchangeRequest* req,
                                            v1::KeyExchangeResponse* out) {
  auto r = gpu_->KeyExchange(domain_, *req);
  if (r.ok()) GT_LOG(1, "domain ", domain_, ": new CC session ", r->session_id());
  return Fill(std::move(r), out);
}

grpc::Status DeviceServiceImpl::Control(grpc::ServerContext*,
                                        const v1::SealedMessage* req,
                                        v1::SealedMessage* out) {
  return Fill(gpu_->Control(domain_, *req), out);
}

grpc::Status DeviceServiceImpl::AttachBounce(grpc::ServerContext*,
                                             const v1::AttachBounceRequest* req,
                                             v1::AttachBounceResponse* out) {
  auto r = gpu_->AttachBounce(domain_, *req);
  if (!r.ok()) return ToGrpc(r.status());
  out->set_bounce_id(*r);
  return grpc::Status::OK;
}

grpc::Status DeviceServiceImpl::DetachBounce(grpc::ServerContext*,
                                             const v1::DetachBounceRequest* req,
                                             v1::DetachBounceResponse*) {
  return ToGrpc(gpu_->DetachBounce(domain_, req->bounce_id()));
}

grpc::Status DeviceServiceImpl::SubmitH2D(grpc::ServerContext*,
                                          const v1::SubmitH2DRequest* req,
                                          v1::SubmitH2DResponse* out) {
  uint64_t attached = 0;
  auto r = gpu_->SubmitH2D(domain_, *req, &attached);
  if (!r.ok()) {
    GT_LOG(1, "domain ", domain_, ": chunk refused: ", r.status().message());
    return ToGrpc(r.status());
  }
  out->set_next_counter(*r);
  out->set_bounce_id(attached);
  return grpc::Status::OK;
}

grpc::Status DeviceServiceImpl::SubmitH2DStream(
    grpc::ServerContext*,
    grpc::ServerReaderWriter<v1::SubmitH2DAck, v1::SubmitH2DRequest>* stream) {
  v1::SubmitH2DRequest req;
  for (uint64_t seq = 0; stream->Read(&req); ++seq) {
    if (req.has_attach()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "chunk " + std::to_string(seq) +
                              " of the stream attaches a bounce buffer: only the unary "
                              "SubmitH2D does; attach the ring with AttachBounce before "
                              "the stream");
    }
    // The same copy-engine rules as the unary doorbell, one chunk after the
    // other on this thread, so the stream's order is the decryption order.
    auto r = gpu_->SubmitH2D(domain_, req);
    if (!r.ok()) {
      GT_LOG(1, "domain ", domain_, ": chunk ", seq, " of a doorbell stream refused: ",
             r.status().message());
      // The stream ends here; chunks sent after this one are never looked at.
      return ToGrpc(absl::Status(r.status().code(),
                                 "chunk " + std::to_string(seq) + " of the stream: " +
                                     std::string(r.status().message())));
    }
    v1::SubmitH2DAck ack;
    ack.set_sequence(seq);
    ack.set_slot(req.slot());
    ack.set_next_counter(*r);
    if (!stream->Write(ack)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the holder went away");
    }
  }
  return grpc::Status::OK;
}

grpc::Status DeviceAdminServiceImpl::SetOwner(grpc::ServerContext*,
                                              const v1::SetOwnerRequest* req,
                                              v1::SetOwnerResponse* resp) {
  gpu_->SetOwner(req->domain());
  *resp->mutable_status() = gpu_->Status();
  GT_LOG(1, "routed to '", req->domain(), "'");
  return grpc::Status::OK;
}

grpc::Status DeviceAdminServiceImpl::Reset(grpc::ServerContext*,
                                           const v1::ResetRequest*,
                                           v1::ResetResponse*) {
  gpu_->Reset();
  GT_LOG(1, "function-level reset: sessions, keys and memory wiped");
  return grpc::Status::OK;
}

grpc::Status DeviceAdminServiceImpl::GetStatus(grpc::ServerContext*,
                                               const v1::GetStatusRequest*,
                                               v1::DeviceStatus* out) {
  *out = gpu_->Status();
  return grpc::Status::OK;
}

}  // namespace gputravel
