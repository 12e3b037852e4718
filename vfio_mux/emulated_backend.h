#ifndef GPUTRAVEL_VFIO_MUX_EMULATED_BACKEND_H_
#define GPUTRAVEL_VFIO_MUX_EMULATED_BACKEND_H_

#include <map>
#include <memory>
#include <set>
#include <string>

#include "proto/device.grpc.pb.h"
#include "vfio_mux/routing_backend.h"

namespace gputravel {

// Routes emulated GPUs by telling each emulated device (through its host
// admin socket) which domain it is now attached to. Chosen only with
// "backend": "emulated" in the MUX configuration.
class EmulatedBackend : public RoutingBackend {
 public:
  // gpu name -> admin endpoint ("unix:/path"); `domains`: the only domains
  // Move routes to (the MUX configuration's "domains").
  EmulatedBackend(std::map<std::string, std::string> admin_endpoints,
                  std::set<std::string> domains);

  std::string Name() const override { return "emulated"; }
  absl::StatusOr<std::vector<GpuDevice>> ListGpus() override;
  absl::Status Move(const std::string& gpu, const std::string& from_domain,
                    const std::string& to_domain) override;
  absl::Status Reset(const std::string& gpu) override;

 private:
  absl::StatusOr<v1::DeviceAdmin::Stub*> StubFor(const std::string& gpu);
  std::map<std::string, std::unique_ptr<v1::DeviceAdmin::Stub>> stubs_;
  const std::set<std::string> domains_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_EMULATED_BACKEND_H_
