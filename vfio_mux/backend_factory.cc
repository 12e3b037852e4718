#include "vfio_mux/backend_factory.h"

#include <map>
#include <set>

#include "util/files.h"
#include "util/json_fields.h"
#include "vfio_mux/emulated_backend.h"
#include "vfio_mux/mux_policy.h"
#include "vfio_mux/libvirt/libvirt_backend.h"
#include "vfio_mux/sysfs/sysfs_backend.h"

namespace gputravel {

namespace {

absl::StatusOr<absl::Duration> Millis(const nlohmann::json& j, const std::string& where,
                                      const std::string& field, absl::Duration dflt) {
  if (!j.contains(field)) return dflt;
  auto v = JsonUint(j, where, field);
  if (!v.ok()) return v.status();
  if (*v == 0) return absl::InvalidArgumentError(where + ": '" + field + "' must be positive");
  return absl::Milliseconds(*v);
}

absl::StatusOr<bool> Bool(const nlohmann::json& j, const std::string& where,
                          const std::string& field, bool dflt) {
  if (!j.contains(field)) return dflt;
  if (!j[field].is_boolean()) {
    return absl::InvalidArgumentError(where + ": '" + field + "' must be true or false");
  }
  return j[field].get<bool>();
}

absl::Status ParseSysfsRoots(const nlohmann::json& s, const std::string& at,
                             PciSysfsOptions* o) {
  if (s.contains("sysfs_root")) {
    auto v = JsonString(s, at, "sysfs_root");
    if (!v.ok()) return v.status();
    o->sysfs_root = *v;
  }
  if (s.contains("proc_root")) {
    auto v = JsonString(s, at, "proc_root");
    if (!v.ok()) return v.status();
    o->proc_root = *v;
  }
  auto t = Millis(s, at, "driver_timeout_ms", o->driver_timeout);
  if (!t.ok()) return t.status();
  o->driver_timeout = *t;
  return absl::OkStatus();
}

absl::StatusOr<SysfsBackendOptions> ParseSysfs(const nlohmann::json& config,
                                               const std::string& where,
                                               std::set<std::string> domains) {
  const std::string at = where + ": sysfs";
  if (!config.contains("sysfs") || !config["sysfs"].is_object()) {
    return absl::InvalidArgumentError(where + ": backend 'sysfs' needs an object 'sysfs'");
  }
  const auto& s = config["sysfs"];
  absl::Status st = RefuseUnknownFields(
      s, {"sysfs_root", "proc_root", "driver_timeout_ms", "prepare_on_start", "gpus"}, at);
  if (!st.ok()) return st;
  SysfsBackendOptions o;
  st = ParseSysfsRoots(s, at, &o.sysfs);
  if (!st.ok()) return st;
  auto prep = Bool(s, at, "prepare_on_start", false);
  if (!prep.ok()) return prep.status();
  o.prepare_on_start = *prep;
  o.domains = std::move(domains);
  if (!s.contains("gpus") || !s["gpus"].is_array() || s["gpus"].empty()) {
    return absl::InvalidArgumentError(
        at + ": 'gpus' must be a non-empty array of {\"name\", \"bdf\"}: the MUX routes only "
             "the GPUs listed there");
  }
  for (const auto& g : s["gpus"]) {
    SysfsGpuConfig gc;
    st = RefuseUnknownFields(g, {"bdf", "name"}, at + ".gpus[]");
    if (!st.ok()) return st;
    auto bdf = JsonString(g, at + ".gpus[]", "bdf");
    if (!bdf.ok()) return bdf.status();
    gc.bdf = *bdf;
    if (g.contains("name")) {
      auto n = JsonString(g, at + ".gpus[]", "name");
      if (!n.ok()) return n.status();
      gc.name = *n;
    }
    o.gpus.push_back(gc);
  }
  return o;
}

absl::StatusOr<LibvirtBackendOptions> ParseLibvirt(const nlohmann::json& config,
                                                   const std::string& where,
                                                   std::set<std::string> domains) {
  const std::string at = where + ": libvirt";
  if (!config.contains("libvirt") || !config["libvirt"].is_object()) {
    return absl::InvalidArgumentError(where + ": backend 'libvirt' needs an object 'libvirt'");
  }
  const auto& s = config["libvirt"];
  absl::Status known = RefuseUnknownFields(
      s, {"uri", "detach_timeout_ms", "check_sysfs", "require_tdx", "sysfs_root",
          "proc_root", "driver_timeout_ms", "domain_names", "gpus"}, at);
  if (!known.ok()) return known;
  LibvirtBackendOptions o;
  o.domains = std::move(domains);
  if (s.contains("uri")) {
    auto v = JsonString(s, at, "uri");
    if (!v.ok()) return v.status();
    o.uri = *v;
  }
  auto t = Millis(s, at, "detach_timeout_ms", o.detach_timeout);
  if (!t.ok()) return t.status();
  o.detach_timeout = *t;
  auto cs = Bool(s, at, "check_sysfs", o.check_sysfs);
  if (!cs.ok()) return cs.status();
  o.check_sysfs = *cs;
  auto tdx = Bool(s, at, "require_tdx", o.require_tdx);
  if (!tdx.ok()) return tdx.status();
  o.require_tdx = *tdx;
  absl::Status st = ParseSysfsRoots(s, at, &o.sysfs);
  if (!st.ok()) return st;
  if (s.contains("domain_names")) {
    if (!s["domain_names"].is_object()) {
      return absl::InvalidArgumentError(at + ": 'domain_names' must map MUX domains to libvirt names");
    }
    for (auto it = s["domain_names"].begin(); it != s["domain_names"].end(); ++it) {
      if (!it.value().is_string()) {
        return absl::InvalidArgumentError(at + ".domain_names." + it.key() + ": must be a string");
      }
      o.domain_names[it.key()] = it.value().get<std::string>();
    }
  }
  if (!s.contains("gpus") || !s["gpus"].is_array() || s["gpus"].empty()) {
    return absl::InvalidArgumentError(at + ": 'gpus' must be a non-empty array");
  }
  for (const auto& g : s["gpus"]) {
    LibvirtGpuConfig gc;
    known = RefuseUnknownFields(g, {"bdf", "name", "alias"}, at + ".gpus[]");
    if (!known.ok()) return known;
    auto bdf = JsonString(g, at + ".gpus[]", "bdf");
    if (!bdf.ok()) return bdf.status();
    gc.bdf = *bdf;
    for (const char* f : {"name", "alias"}) {
      if (!g.contains(f)) continue;
      auto v = JsonString(g, at + ".gpus[]", f);
      if (!v.ok()) return v.status();
      (std::string(f) == "name" ? gc.name : gc.alias) = *v;
    }
    o.gpus.push_back(gc);
  }
  return o;
}

}  // namespace

absl::StatusOr<RoutingBackendConfig> ParseRoutingBackendConfig(const nlohmann::json& config,
                                                               const std::string& where) {
  auto backend = JsonString(config, where, "backend");
  if (!backend.ok()) return backend.status();
  if (*backend != "sysfs" && *backend != "libvirt" && *backend != "emulated") {
    return absl::InvalidArgumentError(where + ": unknown MUX backend '" + *backend +
                                      "' (use emulated, sysfs or libvirt)");
  }
  // The daemon's own fields (vfio_mux/mux_config.h) and the backend's.
  std::set<std::string> known = {"listen",  "state_file", "audit_log", "tls",
                                 "backend", "domains",    "callers",   "metrics_listen"};
  known.insert(*backend == "emulated" ? "gpus" : *backend);
  absl::Status unknown = RefuseUnknownFields(config, known, where);
  if (!unknown.ok()) return unknown;
  auto domains = ParseMuxDomains(config, where);
  if (!domains.ok()) return domains.status();
  RoutingBackendConfig out;
  out.backend = *backend;
  if (*backend == "sysfs") {
    auto o = ParseSysfs(config, where, *domains);
    if (!o.ok()) return o.status();
    out.sysfs = std::move(*o);
    return out;
  }
  if (*backend == "libvirt") {
    auto o = ParseLibvirt(config, where, *domains);
    if (!o.ok()) return o.status();
    out.libvirt = std::move(*o);
    return out;
  }
  out.emulated_domains = *domains;
  if (!config.contains("gpus") || !config["gpus"].is_array() || config["gpus"].empty()) {
    return absl::InvalidArgumentError(where + ": 'gpus' must be a non-empty array");
  }
  for (const auto& g : config["gpus"]) {
    unknown = RefuseUnknownFields(g, {"name", "admin_endpoint"}, where + ": gpus[]");
    if (!unknown.ok()) return unknown;
    auto name = JsonString(g, where + ": gpus[]", "name");
    if (!name.ok()) return name.status();
    absl::Status valid = ValidateMuxName("GPU", *name);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(where + ": gpus[]: " + std::string(valid.message()));
    }
    auto ep = JsonString(g, where + ": gpus[" + *name + "]", "admin_endpoint");
    if (!ep.ok()) return ep.status();
    out.emulated_admin_endpoints[*name] = *ep;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<RoutingBackend>> MakeRoutingBackend(
    const RoutingBackendConfig& config) {
  if (config.backend == "sysfs") {
    auto b = SysfsBackend::Create(config.sysfs);
    if (!b.ok()) return b.status();
    return std::unique_ptr<RoutingBackend>(std::move(*b));
  }
  if (config.backend == "libvirt") {
    auto b = LibvirtBackend::Create(config.libvirt);
    if (!b.ok()) return b.status();
    return std::unique_ptr<RoutingBackend>(std::move(*b));
  }
  if (config.backend == "emulated") {
    return std::unique_ptr<RoutingBackend>(
        new EmulatedBackend(config.emulated_admin_endpoints, config.emulated_domains));
  }
  return absl::InvalidArgumentError("unknown MUX backend '" + config.backend + "'");
}

absl::StatusOr<std::unique_ptr<RoutingBackend>> MakeRoutingBackend(
    const nlohmann::json& config, const std::string& where) {
  auto parsed = ParseRoutingBackendConfig(config, where);
  if (!parsed.ok()) return parsed.status();
  return MakeRoutingBackend(*parsed);
}

}  // namespace gputravel
