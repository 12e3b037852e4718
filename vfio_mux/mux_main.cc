// vfio_mux: the host daemon that routes GPUs between trust domains.
#include <cstring>
#include <memory>
#include <vector>

#include "auth/identity.h"
#include "auth/role_gate.h"
#include "auth/tls_config.h"
#include "metrics/daemon_metrics.h"
#include "util/daemon_main.h"
#include "util/exclusive_lock.h"
#include "util/files.h"
#include "util/log.h"
#include "util/private_files.h"
#include "vfio_mux/api_limits.h"
#include "vfio_mux/backend_factory.h"
#include "vfio_mux/mux_callers.h"
#include "vfio_mux/mux_config.h"
#include "vfio_mux/mux_metrics.h"
#include "vfio_mux/mux_policy.h"
#include "vfio_mux/mux_service.h"
#include "vfio_mux/prepare_command.h"
#include "vfio_mux/route_table.h"

int main(int argc, char** argv) {
  using namespace gputravel;
  const std::string kProgram = "vfio_mux";
  // The host's preparation is a command of the same binary: the daemon's
  // sysfs code, run once by the administrator (deploy/host/prepare_host.sh).
  if (argc >= 2 && std::strcmp(argv[1], "prepare") == 0) {
    return RunPrepareCommand(argc - 1, argv + 1);
  }
  DaemonArgs args = ParseDaemonArgsOrExit(
      argc, argv, kProgram,
      "Host PCIe MUX: routes each GPU to one trust domain at a time, with\n"
      "fencing tokens, a durable route table and an audit log (its journal).\n"
      "Untrusted by design: no security property depends on it.\n"
      "Config JSON: {\"listen\", \"backend\": emulated|sysfs|libvirt,\n"
      "\"state_file\", \"audit_log\", \"tls\": {\"ca\", \"cert\", \"key\", \"crl\"},\n"
      "\"domains\": [TD names it may route to], \"callers\": [pinned certificate\n"
      "files], \"metrics_listen\" (127.0.0.1:PORT: Prometheus metrics over\n"
      "HTTP; off without it), ...} (docs/operations-host.md). A caller's\n"
      "certificate must be one the host's administrator pinned in\n"
      "\"callers\": role orchestrator to route or reset, orchestrator or\n"
      "operator to read.\n"
      "'vfio_mux prepare --bdf=BDF [--dry_run]' instead prepares the host for\n"
      "a GPU (IOMMU check, vfio-pci binding, reset disabled) and exits; see\n"
      "'vfio_mux prepare --help'.");
  const nlohmann::json json = ReadConfigOrExit(kProgram, args.config);
  auto parsed = ParseMuxConfig(json, args.config);
  if (!parsed.ok()) ExitStartupError(kProgram, std::string(parsed.status().message()));
  MuxConfig& cfg = *parsed;
  auto creds = MakeServerCredentials(cfg.tls);
  if (!creds.ok()) ExitStartupError(kProgram, std::string(creds.status().message()));
  // Roles before bodies (api_limits.h), and the CRL again at every call.
  InstallRoleGate(creds->get(), MuxApiRoles(), {}, RevocationListOf(cfg.tls));
  // One MUX per route table and journal, before any GPU or file is touched:
  // two would each accept fencing tokens the other never saw. Held until
  // exit.
  std::vector<std::unique_ptr<ExclusiveLock>> locks;
  for (const std::string& path : {cfg.state_file, cfg.audit_log}) {
    // Whoever may write the directory could replace the route table.
    absl::Status private_dir =
        RequirePrivateDirectory(DirectoryOf(path), "MUX state directory (of " + path + ")");
    if (!private_dir.ok()) ExitStartupError(kProgram, std::string(private_dir.message()));
    auto lock = ExclusiveLock::Acquire(path + ".lock", "MUX on " + path);
    if (!lock.ok()) ExitStartupError(kProgram, std::string(lock.status().message()));
    locks.push_back(*std::move(lock));
  }
  // Metrics (metrics_listen; off without it): routes, resets and fencing
  // refusals, on the host's loopback; served before any GPU is touched.
  std::unique_ptr<DaemonMetrics> metrics;
  std::unique_ptr<MuxMetrics> mux_metrics;
  if (!cfg.metrics_listen.empty()) {
    auto m = DaemonMetrics::Start(cfg.metrics_listen, args.config + ": metrics_listen", nullptr);
    if (!m.ok()) ExitStartupError(kProgram, std::string(m.status().message()));
    metrics = *std::move(m);
    mux_metrics = std::make_unique<MuxMetrics>(metrics->registry());
    GT_LOG(1, "metrics on http://", metrics->address(), kMetricsPath);
  }
  auto backend = MakeRoutingBackend(cfg.backend);
  if (!backend.ok()) ExitStartupError(kProgram, std::string(backend.status().message()));
  RouteTableOptions table_options;
  table_options.domains = cfg.domains;
  auto table = RouteTable::Open(backend->get(), cfg.state_file, cfg.audit_log, table_options);
  if (!table.ok()) ExitStartupError(kProgram, std::string(table.status().message()));
  MuxService service(table->get(), (*backend)->Name(), std::move(cfg.callers),
                     mux_metrics.get());
  GT_LOG(1, "backend ", (*backend)->Name());
  RouteTable* routes = table->get();
  ServeUntilSignal(kProgram, {{cfg.listen, {&service}, *creds, MuxApiLimits()}}, args.ready_file,
                   [routes] {
    // A snapshot covering the whole journal; without it (a crash) the next
    // start replays the journal instead.
    absl::Status s = routes->Close();
    if (!s.ok()) GT_LOG(0, "route table: ", s.message());
  }, nullptr, metrics ? metrics->address() : "");
}
