#ifndef GPUTRAVEL_BENCH_SLOT_FREEING_DEVICE_H_
#define GPUTRAVEL_BENCH_SLOT_FREEING_DEVICE_H_

#include <cstdint>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "proto/device.grpc.pb.h"

namespace gputravel {
namespace bench {

// A stand-in for the GPU that H2dWriter writes to when (a) measures the
// holder's encrypt-and-stage alone: it maps nothing and decrypts nothing, and
// answers each doorbell at once, which frees the chunk's bounce slot. Its
// acks follow the device's rules (in order, the slot echoed, the next
// counter), so the writer runs exactly as against a GPU. Served in process
// (no socket); its channel is what the writer is given.
class SlotFreeingDevice final : public v1::Device::Service {
 public:
  static std::unique_ptr<SlotFreeingDevice> Start();
  ~SlotFreeingDevice() override;

  std::shared_ptr<grpc::Channel> channel() { return channel_; }

  // The counter the next doorbell takes (a window's first counter).
  void ExpectCounter(uint32_t next);
  // Doorbells answered and bytes they named since Start.
  uint64_t chunks() const;
  uint64_t bytes() const;

  grpc::Status AttachBounce(grpc::ServerContext*, const v1::AttachBounceRequest* req,
                            v1::AttachBounceResponse* resp) override;
  grpc::Status DetachBounce(grpc::ServerContext*, const v1::DetachBounceRequest*,
                            v1::DetachBounceResponse*) override;
  grpc::Status SubmitH2D(grpc::ServerContext*, const v1::SubmitH2DRequest* req,
                         v1::SubmitH2DResponse* resp) override;
  grpc::Status SubmitH2DStream(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::SubmitH2DAck, v1::SubmitH2DRequest>* stream) override;

 private:
  SlotFreeingDevice() = default;
  // Takes the doorbell's counter; the next one.
  uint32_t Ring(const v1::SubmitH2DRequest& req);

  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  mutable absl::Mutex mu_;
  uint32_t next_counter_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_bounce_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t chunks_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_SLOT_FREEING_DEVICE_H_
