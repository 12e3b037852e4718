#include "device/emulated_gpu_config.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cstdlib>

#include "keyxfer/secret_bytes.h"
#include "keyxfer/x509.h"
#include "util/files.h"
#include "util/json_fields.h"
#include "util/status_macros.h"

namespace gputravel {

absl::StatusOr<EmulatedGpuConfig> ParseEmulatedGpuConfig(const nlohmann::json& cfg,
                                                         const std::string& where) {
  if (!cfg.is_object()) return absl::InvalidArgumentError(where + ": must be a JSON object");
  GT_RETURN_IF_ERROR(RefuseUnknownFields(
      cfg,
      {"serial", "memory_bytes", "identity_key", "identity_cert", "socket_dir", "domains",
       "shared_dirs", "admin_socket", "rotation_threshold", "heartbeat_period_seconds"},
      where));
  EmulatedGpuConfig out;
  GT_ASSIGN_OR_RETURN(out.options.serial, JsonString(cfg, where, "serial"));
  GT_ASSIGN_OR_RETURN(out.options.memory_bytes, JsonUint(cfg, where, "memory_bytes"));
  GT_ASSIGN_OR_RETURN(out.identity_key, JsonString(cfg, where, "identity_key"));
  GT_ASSIGN_OR_RETURN(out.identity_cert, JsonString(cfg, where, "identity_cert"));
  GT_ASSIGN_OR_RETURN(out.socket_dir, JsonString(cfg, where, "socket_dir"));
  GT_ASSIGN_OR_RETURN(out.admin_socket, JsonString(cfg, where, "admin_socket"));
  if (!cfg.contains("domains") || !cfg["domains"].is_array() || cfg["domains"].empty()) {
    return absl::InvalidArgumentError(where + ": 'domains' must be a non-empty array");
  }
  for (const auto& d : cfg["domains"]) {
    if (!d.is_string() || d.get<std::string>().empty() ||
        d.get<std::string>().find('/') != std::string::npos) {
      return absl::InvalidArgumentError(where + ": every domain must be a plain name");
    }
    out.domains.push_back(d.get<std::string>());
  }
  if (cfg.contains("shared_dirs")) {
    const auto& sd = cfg["shared_dirs"];
    if (!sd.is_object()) {
      return absl::InvalidArgumentError(where + ": 'shared_dirs' must be an object "
                                        "{DOMAIN: DIRECTORY}");
    }
    for (const auto& [dom, dir] : sd.items()) {
      bool listed = false;
      for (const auto& d : out.domains) listed = listed || d == dom;
      if (!listed || !dir.is_string() || dir.get<std::string>().empty() ||
          dir.get<std::string>()[0] != '/') {
        return absl::InvalidArgumentError(
            where + ": 'shared_dirs' entry '" + dom +
            "' must name a domain listed in 'domains' and an absolute directory");
      }
      // Each domain's own existing directory, not a link (the device opens
      // it once, at start): two domains sharing one would share memory.
      struct stat st;
      const std::string path = dir.get<std::string>();
      char* real = ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)
                       ? ::realpath(path.c_str(), nullptr)
                       : nullptr;
      if (real == nullptr) {
        return absl::InvalidArgumentError(where + ": 'shared_dirs' entry '" + dom + "': " +
                                          path +
                                          " must be an existing directory, not a symbolic link");
      }
      const std::string canonical = real;
      std::free(real);
      for (const auto& [other, other_dir] : out.options.shared_dirs) {
        char* o = ::realpath(other_dir.c_str(), nullptr);
        const bool same = o != nullptr && canonical == o;
        std::free(o);
        if (same) {
          return absl::InvalidArgumentError(
              where + ": 'shared_dirs': domains '" + other + "' and '" + dom + "' both name " +
              canonical + "; each domain's shared memory must be its own");
        }
      }
      out.options.shared_dirs[dom] = path;
    }
  }
  if (cfg.contains("rotation_threshold")) {
    GT_ASSIGN_OR_RETURN(out.options.rotation_threshold,
                        JsonUint(cfg, where, "rotation_threshold"));
  }
  if (cfg.contains("heartbeat_period_seconds")) {
    auto t = JsonUint(cfg, where, "heartbeat_period_seconds");
    if (!t.ok() || (*t != 0 && (*t < 4 || *t > 255))) {
      return absl::InvalidArgumentError(
          where + ": 'heartbeat_period_seconds' must be 0 (off) or 4..255, as the driver's "
          "RmConfComputeHeartbeatPeriod");
    }
    out.options.heartbeat_period = absl::Seconds(*t);
  }
  return out;
}

absl::StatusOr<EmulatedGpuIdentity> LoadEmulatedGpuIdentity(const EmulatedGpuConfig& config,
                                                            const std::string& where) {
  auto key_pem = ReadFile(config.identity_key);
  if (!key_pem.ok()) {
    return absl::Status(key_pem.status().code(),
                        where + ": identity_key: " + std::string(key_pem.status().message()));
  }
  auto key = EcKey::FromPrivatePem(*key_pem);
  Zeroize(&(*key_pem)[0], key_pem->size());  // the private key lives on only in `key`
  if (!key.ok()) {
    return absl::InvalidArgumentError(where + ": identity_key " + config.identity_key + ": " +
                                      std::string(key.status().message()));
  }
  auto cert_pem = ReadFile(config.identity_cert);
  if (!cert_pem.ok()) {
    return absl::Status(cert_pem.status().code(),
                        where + ": identity_cert: " + std::string(cert_pem.status().message()));
  }
  auto cert = CertificatePemToDer(*cert_pem);
  if (!cert.ok()) {
    return absl::InvalidArgumentError(where + ": identity_cert " + config.identity_cert + ": " +
                                      std::string(cert.status().message()));
  }
  X509Ptr x509 = ParseCertificate(*cert);
  if (x509 == nullptr || !KeyMatchesCertificate(key->pkey(), x509.get())) {
    return absl::InvalidArgumentError(where + ": identity_key " + config.identity_key +
                                      " is not the key of identity_cert " +
                                      config.identity_cert);
  }
  const std::string cn = CertificateCommonName(x509.get());
  if (cn != config.options.serial) {
    return absl::InvalidArgumentError(where + ": identity_cert " + config.identity_cert +
                                      " is for serial '" + cn + "', this GPU's serial is '" +
                                      config.options.serial + "'");
  }
  return EmulatedGpuIdentity{std::move(*key), *std::move(cert)};
}

}  // namespace gputravel
