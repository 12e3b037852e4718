// The emulated H100-CC device daemon: one process per GPU, one Unix socket per
// trust domain (the GPU "routed to" that domain) plus the host admin socket
// that only the MUX uses.
#include <memory>
#include <vector>

#include "device/device_service.h"
#include "device/emulated_gpu.h"
#include "device/emulated_gpu_config.h"
#include "util/daemon_main.h"
#include "util/files.h"
#include "util/log.h"

namespace gputravel {
namespace {

int Run(int argc, char** argv) {
  const std::string kProgram = "emulated_gpu";
  DaemonArgs args = ParseDaemonArgsOrExit(
      argc, argv, kProgram,
      "Emulated NVIDIA H100 in confidential-computing mode (development\n"
      "and tests only: the project has no NVIDIA driver backend yet).\n"
      "Config JSON: {\"serial\", \"memory_bytes\", \"identity_key\" (PEM),\n"
      "\"identity_cert\" (PEM), \"socket_dir\", \"domains\": [..],\n"
      "\"shared_dirs\": {DOMAIN: DIR} (each holder domain's shared memory, the\n"
      "only directory the device maps that domain's bounce rings from; a domain\n"
      "without one cannot attach a ring), \"admin_socket\", and, optional,\n"
      "\"rotation_threshold\" and \"heartbeat_period_seconds\"}.");
  const std::string where = args.config;
  nlohmann::json json = ReadConfigOrExit(kProgram, where);
  auto cfg = ParseEmulatedGpuConfig(json, where);
  if (!cfg.ok()) ExitStartupError(kProgram, std::string(cfg.status().message()));
  auto identity = LoadEmulatedGpuIdentity(*cfg, where);
  if (!identity.ok()) ExitStartupError(kProgram, std::string(identity.status().message()));
  const EmulatedGpuOptions& opts = cfg->options;
  SetLogPrefix("gpu " + opts.serial);
  EmulatedGpu gpu(opts, std::move(identity->key), identity->cert_der);

  std::vector<std::unique_ptr<DeviceServiceImpl>> services;
  std::vector<ServedEndpoint> endpoints;  // the emulated PCIe bus: plaintext
  for (const std::string& d : cfg->domains) {
    services.push_back(std::make_unique<DeviceServiceImpl>(&gpu, d));
    endpoints.push_back({"unix:" + cfg->socket_dir + "/" + d + ".sock",
                         {services.back().get()}, nullptr});
  }
  DeviceAdminServiceImpl admin_service(&gpu);
  endpoints.push_back({"unix:" + cfg->admin_socket, {&admin_service}, nullptr});
  GT_LOG(1, "serving ", services.size(), " domain socket(s) in ", cfg->socket_dir,
         ", memory ", opts.memory_bytes, " bytes");
  // On shutdown the device memory is wiped, as a power-off would.
  ServeUntilSignal(kProgram, endpoints, args.ready_file, [&gpu] { gpu.Reset(); });
}

}  // namespace
}  // namespace gputravel

int main(int argc, char** argv) { return gputravel::Run(argc, argv); }
