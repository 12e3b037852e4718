// The emulated H100-CC device daemon: one process per GPU, one Unix socket per
// trust domain (the GPU "routed to" that domain) plus the host admin socket
// that only the MUX uses.
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "device/device_service.h"
#include "device/emulated_gpu.h"
#include "grpcpp/grpcpp.h"
#include "keyxfer/secret_bytes.h"
#include "keyxfer/x509.h"
#include "util/daemon_main.h"
#include "util/files.h"
#include "util/json_fields.h"
#include "util/grpc_status.h"
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
  nlohmann::json cfg = ReadConfigOrExit(kProgram, where);
  absl::Status unknown = RefuseUnknownFields(
      cfg,
      {"serial", "memory_bytes", "identity_key", "identity_cert", "socket_dir", "domains",
       "shared_dirs", "admin_socket", "rotation_threshold", "heartbeat_period_seconds"},
      where);
  if (!unknown.ok()) ExitStartupError(kProgram, std::string(unknown.message()));
  EmulatedGpuOptions opts;
  auto serial = JsonString(cfg, where, "serial");
  auto mem = JsonUint(cfg, where, "memory_bytes");
  auto key_path = JsonString(cfg, where, "identity_key");
  auto cert_path = JsonString(cfg, where, "identity_cert");
  auto socket_dir = JsonString(cfg, where, "socket_dir");
  auto admin = JsonString(cfg, where, "admin_socket");
  for (const absl::Status& s : {serial.status(), mem.status(), key_path.status(),
                                cert_path.status(), socket_dir.status(), admin.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "emulated_gpu: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  if (!cfg.contains("domains") || !cfg["domains"].is_array() ||
      cfg["domains"].empty()) {
    std::fprintf(stderr, "emulated_gpu: %s: 'domains' must be a non-empty array\n",
                 where.c_str());
    return 2;
  }
  opts.serial = *serial;
  opts.memory_bytes = *mem;
  if (cfg.contains("shared_dirs")) {
    const auto& sd = cfg["shared_dirs"];
    if (!sd.is_object()) {
      std::fprintf(stderr, "emulated_gpu: %s: 'shared_dirs' must be an object "
                   "{DOMAIN: DIRECTORY}\n", where.c_str());
      return 2;
    }
    for (const auto& [dom, dir] : sd.items()) {
      bool listed = false;
      for (const auto& d : cfg["domains"]) listed = listed || (d.is_string() && d == dom);
      if (!listed || !dir.is_string() || dir.get<std::string>().empty() ||
          dir.get<std::string>()[0] != '/') {
        std::fprintf(stderr, "emulated_gpu: %s: 'shared_dirs' entry '%s' must name a domain "
                     "listed in 'domains' and an absolute directory\n", where.c_str(),
                     dom.c_str());
        return 2;
      }
      // Each domain's own existing directory, not a link (the device opens
      // it once, now): two domains sharing one would share memory.
      struct stat st;
      const std::string path = dir.get<std::string>();
      char* real = ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)
                       ? ::realpath(path.c_str(), nullptr)
                       : nullptr;
      if (real == nullptr) {
        std::fprintf(stderr, "emulated_gpu: %s: 'shared_dirs' entry '%s': %s must be an "
                     "existing directory, not a symbolic link\n", where.c_str(), dom.c_str(),
                     path.c_str());
        return 2;
      }
      const std::string canonical = real;
      std::free(real);
      for (const auto& [other, other_dir] : opts.shared_dirs) {
        char* o = ::realpath(other_dir.c_str(), nullptr);
        const bool same = o != nullptr && canonical == o;
        std::free(o);
        if (same) {
          std::fprintf(stderr, "emulated_gpu: %s: 'shared_dirs': domains '%s' and '%s' "
                       "both name %s; each domain's shared memory must be its own\n",
                       where.c_str(), other.c_str(), dom.c_str(), canonical.c_str());
          return 2;
        }
      }
      opts.shared_dirs[dom] = path;
    }
  }
  if (cfg.contains("rotation_threshold")) {
    auto t = JsonUint(cfg, where, "rotation_threshold");
    if (!t.ok()) {
      std::fprintf(stderr, "emulated_gpu: %s\n", std::string(t.status().message()).c_str());
      return 2;
    }
    opts.rotation_threshold = *t;
  }
  if (cfg.contains("heartbeat_period_seconds")) {
    auto t = JsonUint(cfg, where, "heartbeat_period_seconds");
    if (!t.ok() || (*t != 0 && (*t < 4 || *t > 255))) {
      std::fprintf(stderr, "emulated_gpu: %s: 'heartbeat_period_seconds' must be 0 (off) "
                   "or 4..255, as the driver's RmConfComputeHeartbeatPeriod\n", where.c_str());
      return 2;
    }
    opts.heartbeat_period = absl::Seconds(*t);
  }
  auto key_pem = ReadFile(*key_path);
  if (!key_pem.ok()) {
    std::fprintf(stderr, "emulated_gpu: %s: identity_key: %s\n", where.c_str(),
                 std::string(key_pem.status().message()).c_str());
    return 2;
  }
  auto key = EcKey::FromPrivatePem(*key_pem);
  Zeroize(&(*key_pem)[0], key_pem->size());  // the private key lives on only in `key`
  if (!key.ok()) {
    std::fprintf(stderr, "emulated_gpu: %s: identity_key %s: %s\n", where.c_str(),
                 key_path->c_str(), std::string(key.status().message()).c_str());
    return 2;
  }
  auto cert_pem = ReadFile(*cert_path);
  if (!cert_pem.ok()) {
    std::fprintf(stderr, "emulated_gpu: %s: identity_cert: %s\n", where.c_str(),
                 std::string(cert_pem.status().message()).c_str());
    return 2;
  }
  auto cert = CertificatePemToDer(*cert_pem);
  if (!cert.ok()) {
    std::fprintf(stderr, "emulated_gpu: %s: identity_cert %s: %s\n", where.c_str(),
                 cert_path->c_str(), std::string(cert.status().message()).c_str());
    return 2;
  }
  SetLogPrefix("gpu " + opts.serial);
  EmulatedGpu gpu(opts, std::move(*key), *cert);

  std::vector<std::unique_ptr<DeviceServiceImpl>> services;
  std::vector<ServedEndpoint> endpoints;  // the emulated PCIe bus: plaintext
  for (const auto& d : cfg["domains"]) {
    if (!d.is_string() || d.get<std::string>().empty() ||
        d.get<std::string>().find('/') != std::string::npos) {
      std::fprintf(stderr, "emulated_gpu: %s: every domain must be a plain name\n",
                   where.c_str());
      return 2;
    }
    services.push_back(std::make_unique<DeviceServiceImpl>(&gpu, d.get<std::string>()));
    endpoints.push_back({"unix:" + *socket_dir + "/" + d.get<std::string>() + ".sock",
                         {services.back().get()}, nullptr});
  }
  DeviceAdminServiceImpl admin_service(&gpu);
  endpoints.push_back({"unix:" + *admin, {&admin_service}, nullptr});
  GT_LOG(1, "serving ", services.size(), " domain socket(s) in ", *socket_dir,
         ", memory ", opts.memory_bytes, " bytes");
  // On shutdown the device memory is wiped, as a power-off would.
  ServeUntilSignal(kProgram, endpoints, args.ready_file, [&gpu] { gpu.Reset(); });
}

}  // namespace
}  // namespace gputravel

int main(int argc, char** argv) { return gputravel::Run(argc, argv); }
