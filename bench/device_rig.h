#ifndef GPUTRAVEL_BENCH_DEVICE_RIG_H_
#define GPUTRAVEL_BENCH_DEVICE_RIG_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "device/device_service.h"
#include "device/emulated_gpu.h"
#include "device/gpu_session.h"
#include "grpcpp/grpcpp.h"
#include "keyxfer/cc_channel.h"

namespace gputravel {
namespace bench {

// What the orchestrator hands a holder for one window: the copy-engine key of
// a fresh CC session and the counter the device expects next.
struct RigHandoff {
  ChannelMaterial key;  // LCE0's
  // Copy engines LCE0..LCE(k-1)'s keys, as HandToHolder(k) handed them.
  std::vector<ChannelMaterial> keys;
  uint64_t session_id = 0;
  uint32_t next_counter = 0;
};

// An emulated GPU in this process, reached as in production through gRPC on
// Unix sockets: one per-domain Device service for the orchestrator ("orch")
// and one for a holder ("holder"), in a fresh temporary directory, plus the
// orchestrator's driver (GpuSession) pinned to the rig's device CA. Routing
// is done directly on the device (SetOwner) instead of through a MUX. The
// holder's bounce rings must be created in `holder_shared_dir` (its shared
// memory: the only directory the device maps rings from for it).
class DeviceRig {
 public:
  // With `orch_shared_dir` set, the orchestrator's domain has shared
  // memory too, and may write device memory itself (KeyForOrchestrator).
  static absl::StatusOr<std::unique_ptr<DeviceRig>> Start(
      uint64_t memory_bytes, const std::string& holder_shared_dir = "/dev/shm",
      const std::string& orch_shared_dir = "");
  ~DeviceRig();

  EmulatedGpu& gpu() { return *gpu_; }
  GpuSession& session() { return *session_; }
  const std::string& dir() const { return dir_; }
  const std::string& holder_shared_dir() const { return holder_shared_dir_; }
  const std::string& device_ca_der() const { return ca_der_; }
  std::string orch_endpoint() const { return "unix:" + dir_ + "/orch.sock"; }
  std::string holder_endpoint() const { return "unix:" + dir_ + "/holder.sock"; }
  // A long-lived holder channel (already connected after first use).
  std::shared_ptr<grpc::Channel> holder_channel() { return holder_channel_; }

  // Routes home, establishes a fresh session (the device's H2D counter
  // restarts), takes its LCE H2D key, and routes the device to the holder.
  absl::StatusOr<RigHandoff> HandToHolder(uint32_t engines = 1);
  // The orchestrator loading device memory over its own CC channel: routed
  // home, a fresh session, and its LCE H2D key for a writer on
  // orch_channel() (rings in orch_shared_dir).
  absl::StatusOr<RigHandoff> KeyForOrchestrator(uint32_t engines = 1);
  std::shared_ptr<grpc::Channel> orch_channel() { return orch_channel_; }
  // Routes the device back to the orchestrator.
  void RouteHome() { gpu_->SetOwner("orch"); }

  // Function-level reset (sessions, memory and attached bounce rings go),
  // then a fresh session and one new device buffer of `bytes`; its id.
  absl::StatusOr<uint64_t> ResetAndAlloc(uint64_t bytes);

 private:
  DeviceRig() = default;
  std::string dir_, ca_der_, holder_shared_dir_;
  std::unique_ptr<EmulatedGpu> gpu_;
  std::unique_ptr<DeviceServiceImpl> orch_service_, holder_service_;
  std::unique_ptr<grpc::Server> orch_server_, holder_server_;
  std::unique_ptr<GpuSession> session_;
  std::shared_ptr<grpc::Channel> holder_channel_, orch_channel_;
};

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_DEVICE_RIG_H_
