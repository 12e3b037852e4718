#ifndef GPUTRAVEL_DEVICE_DEVICE_SERVICE_H_
#define GPUTRAVEL_DEVICE_DEVICE_SERVICE_H_

#include <string>

#include "device/emulated_gpu.h"
#include "proto/device.grpc.pb.h"

namespace gputravel {

// The Device service as reached from one domain's socket: every call is made
// on behalf of `domain`, the domain this socket stands for.
class DeviceServiceImpl final : public v1::Device::Service {
 public:
  DeviceServiceImpl(EmulatedGpu* gpu, std::string domain)
      : gpu_(gpu), domain_(std::move(domain)) {}

  grpc::Status GetIdentity(grpc::ServerContext*, const v1::GetIdentityRequest*,
                           v1::DeviceIdentity* out) override;
  grpc::Status KeyExchange(grpc::ServerContext*, const v1::KeyExchangeRequest* req,
                           v1::KeyExchangeResponse* out) override;
  grpc::Status Control(grpc::ServerContext*, const v1::SealedMessage* req,
                       v1::SealedMessage* out) override;
  grpc::Status AttachBounce(grpc::ServerContext*, const v1::AttachBounceRequest* req,
                            v1::AttachBounceResponse* out) override;
  grpc::Status DetachBounce(grpc::ServerContext*, const v1::DetachBounceRequest* req,
                            v1::DetachBounceResponse*) override;
  grpc::Status SubmitH2D(grpc::ServerContext*, const v1::SubmitH2DRequest* req,
                         v1::SubmitH2DResponse* out) override;
  // Chunks in arrival order, one ack each; the first refused chunk ends the
  // stream with its status.
  grpc::Status SubmitH2DStream(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::SubmitH2DAck, v1::SubmitH2DRequest>* stream) override;

 private:
  EmulatedGpu* gpu_;
  const std::string domain_;
};

// The host-side admin service, reachable only by the MUX.
class DeviceAdminServiceImpl final : public v1::DeviceAdmin::Service {
 public:
  explicit DeviceAdminServiceImpl(EmulatedGpu* gpu) : gpu_(gpu) {}
  grpc::Status SetOwner(grpc::ServerContext*, const v1::SetOwnerRequest* req,
                        v1::SetOwnerResponse*) override;
  grpc::Status Reset(grpc::ServerContext*, const v1::ResetRequest*,
                     v1::ResetResponse*) override;
  grpc::Status GetStatus(grpc::ServerContext*, const v1::GetStatusRequest*,
                         v1::DeviceStatus* out) override;

 private:
  EmulatedGpu* gpu_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_DEVICE_SERVICE_H_
