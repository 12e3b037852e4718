#ifndef GPUTRAVEL_DEVICE_DEVICE_RELAY_H_
#define GPUTRAVEL_DEVICE_DEVICE_RELAY_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "proto/device.grpc.pb.h"

namespace gputravel {

// Tests only: what the host can do with a domain's device socket, which it
// relays (it stands for the PCIe path, and the host owns every path): pass
// each call on to the device, answer Control itself with a status of its
// choice (it cannot forge a sealed reply), or hold a holder's doorbells
// back. Serves the whole Device API: GetIdentity, KeyExchange and Control
// (the orchestrator's calls) and the holder's bounce-ring and doorbell
// calls.
class DeviceRelay : public v1::Device::Service {
 public:
  // Forwards to `upstream` ("unix:/path"); empty: set later (SetUpstream),
  // calls before that are UNAVAILABLE.
  explicit DeviceRelay(std::string upstream = "");
  void SetUpstream(const std::string& upstream);
  // From the `after_exchanges`-th KeyExchange that passes through on (0:
  // from now on), every Control is answered with `code` and never reaches
  // the device. OK: forward everything again.
  void AnswerControlWith(grpc::StatusCode code, int after_exchanges = 0);
  // Control calls the relay answered itself.
  int faked() const { return faked_.load(); }
  // While true, doorbells (SubmitH2D, and each SubmitH2DStream message) are
  // kept from the device: the writer waits for acks that never come, until
  // it gives up or is cancelled.
  void HoldDoorbells(bool hold) { hold_doorbells_ = hold; }
  // Doorbells the relay kept from the device.
  int held() const { return held_.load(); }

  grpc::Status GetIdentity(grpc::ServerContext*, const v1::GetIdentityRequest* req,
                           v1::DeviceIdentity* resp) override;
  grpc::Status KeyExchange(grpc::ServerContext*, const v1::KeyExchangeRequest* req,
                           v1::KeyExchangeResponse* resp) override;
  grpc::Status Control(grpc::ServerContext*, const v1::SealedMessage* req,
                       v1::SealedMessage* resp) override;
  grpc::Status AttachBounce(grpc::ServerContext*, const v1::AttachBounceRequest* req,
                            v1::AttachBounceResponse* resp) override;
  grpc::Status DetachBounce(grpc::ServerContext*, const v1::DetachBounceRequest* req,
                            v1::DetachBounceResponse* resp) override;
  grpc::Status SubmitH2D(grpc::ServerContext* sctx, const v1::SubmitH2DRequest* req,
                         v1::SubmitH2DResponse* resp) override;
  grpc::Status SubmitH2DStream(
      grpc::ServerContext* sctx,
      grpc::ServerReaderWriter<v1::SubmitH2DAck, v1::SubmitH2DRequest>* stream) override;

 private:
  std::shared_ptr<v1::Device::Stub> Upstream();

  absl::Mutex mu_;
  std::shared_ptr<v1::Device::Stub> upstream_ ABSL_GUARDED_BY(mu_);
  grpc::StatusCode code_ ABSL_GUARDED_BY(mu_) = grpc::StatusCode::OK;
  int exchanges_left_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int> faked_{0};
  std::atomic<bool> hold_doorbells_{false};
  std::atomic<int> held_{0};
};

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_DEVICE_RELAY_H_
