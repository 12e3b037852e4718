#include "bench/slot_freeing_device.h"

#include "util/grpc_status.h"

namespace gputravel {
namespace bench {

std::unique_ptr<SlotFreeingDevice> SlotFreeingDevice::Start() {
  std::unique_ptr<SlotFreeingDevice> d(new SlotFreeingDevice());
  grpc::ServerBuilder b;
  b.RegisterService(d.get());
  d->server_ = b.BuildAndStart();
  if (d->server_ == nullptr) return nullptr;
  d->channel_ = d->server_->InProcessChannel(grpc::ChannelArguments());
  return d;
}

SlotFreeingDevice::~SlotFreeingDevice() {
  if (server_ != nullptr) server_->Shutdown(Deadline(2));
}

void SlotFreeingDevice::ExpectCounter(uint32_t next) {
  absl::MutexLock l(&mu_);
  next_counter_ = next;
}

uint64_t SlotFreeingDevice::chunks() const {
  absl::MutexLock l(&mu_);
  return chunks_;
}

uint64_t SlotFreeingDevice::bytes() const {
  absl::MutexLock l(&mu_);
  return bytes_;
}

uint32_t SlotFreeingDevice::Ring(const v1::SubmitH2DRequest& req) {
  absl::MutexLock l(&mu_);
  ++chunks_;
  bytes_ += req.length();
  return ++next_counter_;
}

grpc::Status SlotFreeingDevice::AttachBounce(grpc::ServerContext*,
                                             const v1::AttachBounceRequest* req,
                                             v1::AttachBounceResponse* resp) {
  if (req->slots() == 0 || req->slot_size() == 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "empty bounce ring");
  }
  absl::MutexLock l(&mu_);
  resp->set_bounce_id(next_bounce_id_++);
  return grpc::Status::OK;
}

grpc::Status SlotFreeingDevice::DetachBounce(grpc::ServerContext*,
                                             const v1::DetachBounceRequest*,
                                             v1::DetachBounceResponse*) {
  return grpc::Status::OK;
}

grpc::Status SlotFreeingDevice::SubmitH2D(grpc::ServerContext*,
                                          const v1::SubmitH2DRequest* req,
                                          v1::SubmitH2DResponse* resp) {
  resp->set_next_counter(Ring(*req));
  if (req->has_attach() && !req->release_bounce()) {
    absl::MutexLock l(&mu_);
    resp->set_bounce_id(next_bounce_id_++);
  }
  return grpc::Status::OK;
}

grpc::Status SlotFreeingDevice::SubmitH2DStream(
    grpc::ServerContext*,
    grpc::ServerReaderWriter<v1::SubmitH2DAck, v1::SubmitH2DRequest>* stream) {
  v1::SubmitH2DRequest req;
  for (uint64_t seq = 0; stream->Read(&req); ++seq) {
    v1::SubmitH2DAck ack;
    ack.set_sequence(seq);
    ack.set_slot(req.slot());
    ack.set_next_counter(Ring(req));
    if (!stream->Write(ack)) break;
  }
  return grpc::Status::OK;
}

}  // namespace bench
}  // namespace gputravel
