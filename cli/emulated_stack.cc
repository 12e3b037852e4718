#include "cli/emulated_stack.h"

#include <limits.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "auth/pki.h"
#include "holder_agent/dataset.h"
#include "keyxfer/dev_attester.h"
#include "keyxfer/random.h"
#include "keyxfer/runtime_measurement.h"
#include "nlohmann/json.hpp"
#include "orchestrator/eval_set.h"
#include "proto/orchestrator.grpc.pb.h"
#include "trainer/synthetic_corpus.h"
#include "util/daemon.h"
#include "util/files.h"
#include "util/grpc_status.h"
#include "util/hex.h"

namespace gputravel {
namespace {

using json = nlohmann::json;

// Daemons: name in runfiles (package/target) and in an installed flat dir.
const char* const kDaemons[][2] = {
    {"device/emulated_gpu_daemon", "emulated_gpu_daemon"},
    {"vfio_mux/vfio_mux", "vfio_mux"},
    {"holder_agent/holder_agent", "holder_agent"},
    {"orchestrator/orchestrator", "orchestrator"},
};

bool HasDaemons(const std::string& dir, bool runfiles_layout) {
  for (const auto& d : kDaemons) {
    if (::access((dir + "/" + d[runfiles_layout ? 0 : 1]).c_str(), X_OK) != 0) return false;
  }
  return true;
}

std::string SelfExe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : "";
}

std::string Daemon(const std::string& bin_dir, int index) {
  std::string runfiles = bin_dir + "/" + kDaemons[index][0];
  if (::access(runfiles.c_str(), X_OK) == 0) return runfiles;
  return bin_dir + "/" + kDaemons[index][1];
}

absl::Status WriteJson(const std::string& path, const json& j) {
  return WriteFile(path, j.dump(2) + "\n", 0600);
}

json TlsJson(const TlsFiles& f) {
  json j{{"ca", f.ca}, {"cert", f.cert}, {"key", f.key}};
  if (!f.crl.empty()) j["crl"] = f.crl;
  return j;
}

json DevAttestation(const DevPki& pki, const std::string& domain,
                    const std::vector<std::string>& peer_mrtd) {
  return json{{"backend", "dev"},
              {"allow_insecure_dev_attestation", true},
              {"dev_key", pki.domains.at(domain).key},
              {"dev_cert", pki.domains.at(domain).cert},
              {"dev_root_ca", pki.attestation_root},
              {"peer_mrtd", peer_mrtd}};
}

}  // namespace

absl::StatusOr<std::string> FindDaemonDir(const std::string& override_dir) {
  if (!override_dir.empty()) {
    // A directory the user named is the only place to look: falling back to
    // other daemons would run what they did not choose.
    if (HasDaemons(override_dir, true) || HasDaemons(override_dir, false)) return override_dir;
    return absl::NotFoundError(
        "the daemon directory " + override_dir +
        " does not hold all of emulated_gpu_daemon, vfio_mux, holder_agent and orchestrator "
        "(side by side, or in Bazel's runfiles layout)");
  }
  std::vector<std::pair<std::string, bool>> candidates;
  if (const char* r = getenv("RUNFILES_DIR")) candidates.push_back({std::string(r) + "/gputravel", true});
  if (const char* r = getenv("TEST_SRCDIR")) candidates.push_back({std::string(r) + "/gputravel", true});
  std::string self = SelfExe();
  if (!self.empty()) {
    candidates.push_back({self + ".runfiles/gputravel", true});
    candidates.push_back({self.substr(0, self.find_last_of('/')), false});
  }
  for (const auto& c : candidates) {
    if (HasDaemons(c.first, c.second)) return c.first;
  }
  return absl::NotFoundError(
      "cannot find the daemons (emulated_gpu_daemon, vfio_mux, holder_agent, "
      "orchestrator) in this program's Bazel runfiles: start it with `bazel run`, or pass "
      "--bin_dir");
}

std::string EmulatedStack::device_socket(const std::string& domain) const {
  return "unix:" + dir_ + "/dev/" + domain + ".sock";
}

std::map<std::string, std::string> EmulatedStack::logs() const {
  std::map<std::string, std::string> out;
  for (const auto& p : procs_) out[p.first] = dir_ + "/logs/" + p.first + ".log";
  return out;
}

Subprocess* EmulatedStack::process(const std::string& name) {
  for (auto& p : procs_) {
    if (p.first == name) return p.second.get();
  }
  return nullptr;
}

TlsFiles EmulatedStack::tls(const Identity& id) const {
  return TlsFiles{CaCertPath(tls_dir()), IdentityCertPath(tls_dir(), id),
                  IdentityKeyPath(tls_dir(), id), CrlPath(tls_dir())};
}

absl::Status EmulatedStack::Launch(const std::string& name, const std::string& binary,
                                   const std::string& config) {
  launch_[name] = {binary, config};
  procs_.emplace_back(name, std::make_unique<Subprocess>());
  return WaitReady(name);
}

absl::Status EmulatedStack::WaitReady(const std::string& name) {
  Subprocess* p = process(name);
  const std::string ready = dir_ + "/run/" + name + ".ready";
  const std::string log = dir_ + "/logs/" + name + ".log";
  ::unlink(ready.c_str());
  absl::Status s = p->Start({launch_[name].first, "--config=" + launch_[name].second,
                             "--ready_file=" + ready,
                             "--v=" + std::to_string(options_.log_level)},
                            log);
  if (!s.ok()) return s;
  s = WaitForFile(ready, p, name, 20000);
  if (!s.ok()) {
    return absl::Status(s.code(), std::string(s.message()) + "; its log ends with:\n" +
                                      LogTail(log));
  }
  return absl::OkStatus();
}

std::string EmulatedStack::ListenAddress(const std::string& socket_name) const {
  return options_.tcp_loopback ? "127.0.0.1:0" : "unix:" + dir_ + "/" + socket_name + ".sock";
}

absl::StatusOr<std::string> EmulatedStack::Served(const std::string& name, json* config) {
  auto ready = ReadFile(dir_ + "/run/" + name + ".ready");
  if (!ready.ok()) return ready.status();
  auto announced = AnnouncedAddress(*ready, "listen");
  if (!announced.ok()) {
    return absl::InternalError(name + " announced no address in its ready file");
  }
  const std::string address = *announced;
  if ((*config)["listen"] != address) {
    (*config)["listen"] = address;
    absl::Status s = WriteJson(launch_[name].second, *config);
    if (!s.ok()) return s;
  }
  return address;
}

absl::StatusOr<std::string> EmulatedStack::metrics_address(const std::string& name) const {
  auto ready = ReadFile(dir_ + "/run/" + name + ".ready");
  if (!ready.ok()) return ready.status();
  auto announced = AnnouncedAddress(*ready, "metrics");
  if (!announced.ok()) {
    return absl::NotFoundError(name + " announced no metrics address in its ready file");
  }
  return announced;
}

absl::Status EmulatedStack::Restart(const std::string& name) {
  Subprocess* p = process(name);
  if (p == nullptr) return absl::NotFoundError("no daemon named " + name);
  if (p->Running()) return absl::FailedPreconditionError(name + " is still running");
  return WaitReady(name);
}

absl::StatusOr<std::unique_ptr<EmulatedStack>> EmulatedStack::Start(StackOptions options) {
  if (options.holders < 1 || options.holders > 16) {
    return absl::InvalidArgumentError("--holders must be between 1 and 16");
  }
  auto bin_dir = FindDaemonDir(options.bin_dir);
  if (!bin_dir.ok()) return bin_dir.status();
  std::unique_ptr<EmulatedStack> st(new EmulatedStack());
  st->options_ = options;
  st->bin_dir_ = *bin_dir;
  char tmpl[] = "/tmp/gputravel-XXXXXX";  // short: Unix socket paths are limited
  if (mkdtemp(tmpl) == nullptr) return absl::UnavailableError("cannot create a temporary directory");
  st->dir_ = tmpl;
  const std::string& d = st->dir_;
  for (const char* sub : {"/dev", "/logs", "/run", "/data", "/state", "/pki", "/shm"}) {
    ::mkdir((d + sub).c_str(), 0700);
  }

  std::vector<std::string> domains = {kOrchestratorDomain};
  std::vector<StackHolder> holders;
  for (int i = 0; i < options.holders; ++i) {
    StackHolder h;
    h.name = "holder-" + std::string(1, static_cast<char>('a' + i));
    h.domain = "td-" + h.name;
    h.endpoint = st->ListenAddress(h.name);
    h.dataset = h.name + "-tokens";
    holders.push_back(h);
    domains.push_back(h.domain);
  }
  for (const auto& h : options.extra_holders) domains.push_back(h.domain);
  json shared_dirs = json::object();  // every holder domain's own shared memory
  for (const auto& dom : domains) {
    if (dom == kOrchestratorDomain) continue;
    if (::mkdir(st->shared_dir(dom).c_str(), 0700) != 0) {
      return absl::UnavailableError("cannot create " + st->shared_dir(dom) + ": " +
                                    std::strerror(errno));
    }
    shared_dirs[dom] = st->shared_dir(dom);
  }
  auto pki = CreateDevPki(d + "/pki", kGpuSerial, domains);
  if (!pki.ok()) return pki.status();
  st->pki_ = *pki;
  st->holders_ = holders;
  for (const auto& h : options.extra_holders) st->holders_.push_back(h);

  // The campaign CA and one certificate per identity (what `gputravel pki`
  // does for a real deployment).
  absl::Status s = InitCampaignCa(st->tls_dir(), options.campaign, 31);
  if (!s.ok()) return s;
  std::vector<Identity> ids = {{kRoleOrchestrator, "orchestrator"},
                               {kRoleMux, "mux"},
                               {kRoleOperator, "operator"},
                               {kRoleScheduler, "scheduler"}};
  for (const auto& h : st->holders_) ids.push_back({kRoleHolder, h.name});
  if (!options.external_trainer.empty()) ids.push_back({kRoleTrainer, options.external_trainer});
  for (const auto& id : ids) {
    auto issued = IssueIdentity(st->tls_dir(), id, 30);
    if (!issued.ok()) return issued.status();
  }

  auto holder_mrtd = MeasureFile(Daemon(st->bin_dir_, 2));
  auto orch_mrtd = MeasureFile(Daemon(st->bin_dir_, 3));
  if (!holder_mrtd.ok()) return holder_mrtd.status();
  if (!orch_mrtd.ok()) return orch_mrtd.status();
  std::vector<std::string> allowed_holders = {HexEncode(*holder_mrtd)};
  for (const auto& m : options.extra_holder_mrtd_hex) allowed_holders.push_back(m);

  // The GPU.
  json dev = {{"serial", kGpuSerial},
              {"memory_bytes", options.gpu_memory_bytes},
              {"identity_key", st->pki_.device_key},
              {"identity_cert", st->pki_.device_cert},
              {"socket_dir", d + "/dev"},
              {"domains", domains},
              {"shared_dirs", shared_dirs},
              {"admin_socket", d + "/device-admin.sock"},
              {"heartbeat_period_seconds", options.heartbeat_period_seconds}};
  s = WriteJson(d + "/device.json", dev);
  if (!s.ok()) return s;
  s = st->Launch("gpu", Daemon(st->bin_dir_, 0), d + "/device.json");
  if (!s.ok()) return s;

  // The MUX: it routes only to the stack's domains and obeys only the
  // pinned orchestrator and operator certificates (the host's side of P8).
  json mux = {{"listen", st->ListenAddress("mux")},
              {"backend", "emulated"},
              {"state_file", d + "/state/mux-routes.json"},
              {"audit_log", d + "/logs/mux-audit.jsonl"},
              {"tls", TlsJson(st->tls({kRoleMux, "mux"}))},
              {"domains", domains},
              {"callers", json::array(
                   {IdentityCertPath(st->tls_dir(), {kRoleOrchestrator, "orchestrator"}),
                    IdentityCertPath(st->tls_dir(), {kRoleOperator, "operator"})})},
              {"gpus", json::array({{{"name", "gpu0"},
                                     {"admin_endpoint", st->device_admin_endpoint()}}})}};
  if (options.metrics) mux["metrics_listen"] = "127.0.0.1:0";
  s = WriteJson(d + "/mux.json", mux);
  if (!s.ok()) return s;
  s = st->Launch("mux", Daemon(st->bin_dir_, 1), d + "/mux.json");
  if (!s.ok()) return s;
  auto served = st->Served("mux", &mux);
  if (!served.ok()) return served.status();
  st->mux_endpoint_ = *served;

  // Holders and their datasets (llm.c shards; the third is a raw file), all
  // drawn from one synthetic language so the trainer's loss falls as the
  // GPU visits them. Their configurations are written once the orchestrator's
  // measurement is known (below).
  std::vector<json> holder_configs;
  for (int i = 0; i < options.holders; ++i) {
    const StackHolder& h = holders[i];
    uint64_t bytes = i < static_cast<int>(options.dataset_bytes.size())
                         ? options.dataset_bytes[i]
                         : (3u << 20) + uint64_t(i) * (5u << 19);
    bytes &= ~uint64_t{1};
    std::string path = d + "/data/" + h.name + (i == 2 ? ".raw" : ".bin");
    std::string format = i == 2 ? "raw" : "llmc-tokens";
    if (i < static_cast<int>(options.dataset_files.size())) {
      path = options.dataset_files[i];
      format = "auto";
    } else {
      std::vector<uint16_t> tokens = GenerateCorpus(StackCorpusSeed(i), bytes / 2);
      if (i == 2) {
        s = WriteFile(path, std::string(reinterpret_cast<char*>(tokens.data()), bytes), 0600);
      } else {
        s = WriteLlmcShard(path, tokens.data(), tokens.size());
      }
      if (!s.ok()) return s;
    }
    holder_configs.push_back(
        {{"name", h.name},
         {"domain", h.domain},
         {"listen", h.endpoint},
         {"dataset", {{"name", h.dataset}, {"path", path}, {"format", format}}},
         {"tls", TlsJson(st->tls({kRoleHolder, h.name}))},
         // Explicit, as in every deployment: the one orchestrator answered.
         {"orchestrator_names", json::array({"orchestrator"})},
         {"device_endpoint", st->device_socket(h.domain)},
         {"threads", options.threads},
         {"bounce_dir", st->shared_dir(h.domain)},
         {"state_dir", d + "/state-" + h.name},
         {"training_policy", options.holder_training_policy},
         {"attestation", DevAttestation(st->pki_, h.domain, {HexEncode(*orch_mrtd)})}});
    if (options.metrics) holder_configs.back()["metrics_listen"] = "127.0.0.1:0";
  }

  // Each side pins the other's RTMR3 events, as a deployment does with
  // `gputravel measure`. The orchestrator's binary and config events do not
  // depend on any pins: measured first, they go into each holder's pins,
  // which are part of the holder's config event. The orchestrator then pins
  // each holder's binary and config events (its peer_pins event), and the
  // holders pin that event too.
  json orch = {
      {"listen", st->ListenAddress("orchestrator")},
      {"domain", kOrchestratorDomain},
      {"state_dir", d + "/state"},
      {"mux_endpoint", st->mux_endpoint()},
      {"gpus", json::array({{{"name", "gpu0"},
                             {"device_endpoint",
                              options.orchestrator_device_endpoint.empty()
                                  ? st->device_socket(kOrchestratorDomain)
                                  : options.orchestrator_device_endpoint},
                             {"device_ca", st->pki_.device_ca_cert},
                             {"serial", kGpuSerial},
                             {"heartbeat_period_seconds", options.heartbeat_period_seconds}}})},
      {"attestation", DevAttestation(st->pki_, kOrchestratorDomain, allowed_holders)},
      {"tls", TlsJson(st->tls({kRoleOrchestrator, "orchestrator"}))}};
  if (!options.external_trainer.empty()) orch["trainer_listen"] = st->trainer_endpoint();
  if (options.metrics) orch["metrics_listen"] = "127.0.0.1:0";
  if (options.eval_set) {
    // Held-out text of the same synthetic language, drawn with a seed no
    // holder uses: the orchestrator's own, inside its TD.
    const std::string eval_path = d + "/data/orchestrator-eval.bin";
    std::vector<uint16_t> eval = GenerateCorpus(424242, kMaxEvalTokens);
    s = WriteLlmcShard(eval_path, eval.data(), eval.size());
    if (!s.ok()) return s;
    orch["eval_tokens"] = eval_path;
  }
  auto orch_first = MeasureDaemon("orchestrator", Daemon(st->bin_dir_, 3), orch,
                                  d + "/orchestrator.json");
  if (!orch_first.ok()) return orch_first.status();
  const json orchestrator_binary_config = {
      {"binary", HexEncode(orch_first->events[kRtmr3BinaryEvent])},
      {"config", HexEncode(orch_first->events[kRtmr3ConfigEvent])}};
  json holder_pins = {{"binary", json::array()}, {"config", json::array()}};
  for (int i = 0; i < options.holders; ++i) {
    const std::string path = d + "/" + holders[i].name + ".json";
    holder_configs[i]["attestation"]["peer_rtmr3"] = orchestrator_binary_config;
    auto m = MeasureDaemon("holder_agent", Daemon(st->bin_dir_, 2), holder_configs[i], path);
    if (!m.ok()) return m.status();
    if (i == 0) holder_pins["binary"].push_back(HexEncode(m->events[kRtmr3BinaryEvent]));
    holder_pins["config"].push_back(HexEncode(m->events[kRtmr3ConfigEvent]));
  }
  for (const auto& hex : options.extra_holder_binary_event_hex) {
    holder_pins["binary"].push_back(hex);
  }
  for (const auto& hex : options.extra_holder_config_event_hex) {
    holder_pins["config"].push_back(hex);
  }
  orch["attestation"]["peer_rtmr3"] = holder_pins;
  auto orch_m = MeasureDaemon("orchestrator", Daemon(st->bin_dir_, 3), orch,
                              d + "/orchestrator.json");
  if (!orch_m.ok()) return orch_m.status();
  const json orchestrator_pins = {
      {"binary", HexEncode(orch_m->events[kRtmr3BinaryEvent])},
      {"config", HexEncode(orch_m->events[kRtmr3ConfigEvent])},
      {"peer_pins", HexEncode(orch_m->events[kRtmr3PeerPinsEvent])}};

  for (int i = 0; i < options.holders; ++i) {
    const StackHolder& h = holders[i];
    json& hc = holder_configs[i];
    hc["attestation"]["peer_rtmr3"] = orchestrator_pins;
    s = WriteJson(d + "/" + h.name + ".json", hc);
    if (!s.ok()) return s;
    s = st->Launch(h.name, Daemon(st->bin_dir_, 2), d + "/" + h.name + ".json");
    if (!s.ok()) return s;
    served = st->Served(h.name, &hc);
    if (!served.ok()) return served.status();
    st->holders_[i].endpoint = *served;
    st->holder_names_.push_back(h.name);
  }

  // The orchestrator.
  s = WriteJson(d + "/orchestrator.json", orch);
  if (!s.ok()) return s;
  s = st->Launch("orchestrator", Daemon(st->bin_dir_, 3), d + "/orchestrator.json");
  if (!s.ok()) return s;
  served = st->Served("orchestrator", &orch);
  if (!served.ok()) return served.status();
  st->orchestrator_endpoint_ = *served;
  return st;
}

json EmulatedStack::CampaignSpec() const {
  json hs = json::array();
  for (const auto& h : holders_) {
    hs.push_back({{"name", h.name},
                  {"endpoint", h.endpoint},
                  {"domain", h.domain},
                  {"dataset", {{"name", h.dataset}}}});
  }
  json spec = {{"name", options_.campaign},
               {"gpu", "gpu0"},
               {"buffer_bytes", options_.buffer_bytes},
               {"chunk_bytes", options_.chunk_bytes},
               {"rounds", options_.rounds},
               {"schedule", options_.schedule},
               {"holder_timeout_seconds", options_.holder_timeout_seconds},
               {"on_holder_failure", options_.on_holder_failure},
               {"holders", hs}};
  if (options_.copy_engines != 0) spec["copy_engines"] = options_.copy_engines;
  spec["trainer"] = options_.trainer ? json{{"kind", "next-token"}, {"batch_tokens", 16384}}
                                     : json{{"kind", "none"}};
  if (!options_.external_trainer.empty()) {
    spec["trainer"] = json{{"kind", "external"},
                           {"identity", options_.external_trainer},
                           {"batch_tokens", 16384}};
  }
  return spec;
}

std::unique_ptr<v1::Orchestrator::Stub> EmulatedStack::OperatorClient() const {
  auto channel = MakeSecureChannel(orchestrator_endpoint(), tls({kRoleOperator, "operator"}),
                                   Identity{kRoleOrchestrator, "orchestrator"});
  if (!channel.ok()) return nullptr;
  return v1::Orchestrator::NewStub(*channel);
}

absl::StatusOr<v1::Campaign> EmulatedStack::WaitForFinal(const std::string& name,
                                                         double seconds,
                                                         bool paused_ends_wait) const {
  auto stub = OperatorClient();
  if (stub == nullptr) return absl::InternalError("cannot build the operator's TLS channel");
  auto until = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (true) {
    // Watch until the stream ends (the campaign is final), then read it.
    grpc::ClientContext wctx;
    wctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::WatchCampaignRequest wreq;
    wreq.set_name(name);
    auto reader = stub->WatchCampaign(&wctx, wreq);
    v1::Event ev;
    while (reader->Read(&ev)) {
    }
    (void)reader->Finish();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::GetCampaignRequest req;
    req.set_name(name);
    req.set_include_trips(true);
    v1::Campaign c;
    absl::Status s = FromGrpc(stub->GetCampaign(&ctx, req, &c), "orchestrator GetCampaign");
    if (s.ok() && (c.state() == v1::COMPLETED || c.state() == v1::FAILED ||
                   c.state() == v1::CANCELLED ||
                   (paused_ends_wait && c.state() == v1::PAUSED))) {
      return c;
    }
    if (std::chrono::steady_clock::now() > until) {
      return absl::DeadlineExceededError("campaign '" + name + "' not final after " +
                                         std::to_string(seconds) + " s (state " +
                                         v1::CampaignState_Name(c.state()) + ")" +
                                         (s.ok() ? "" : ": " + std::string(s.message())));
    }
    if (!s.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

absl::StatusOr<v1::Campaign> EmulatedStack::RunCampaign(const json* spec) {
  auto stub = OperatorClient();
  if (stub == nullptr) return absl::InternalError("cannot build the operator's TLS channel");
  json body = spec != nullptr ? *spec : CampaignSpec();
  v1::CreateCampaignRequest req;
  req.set_request_id(HexEncode(RandomString(16)));
  req.set_spec_json(body.dump());
  v1::CreateCampaignResponse created;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    absl::Status s =
        FromGrpc(stub->CreateCampaign(&ctx, req, &created), "orchestrator CreateCampaign");
    if (!s.ok()) return s;
  }
  const std::string name = created.campaign().name();
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::CampaignRef ref;
    ref.set_name(name);
    v1::Campaign c;
    absl::Status s = FromGrpc(stub->StartCampaign(&ctx, ref, &c), "orchestrator StartCampaign");
    if (!s.ok()) return s;
  }
  return WaitForFinal(name, 1200, /*paused_ends_wait=*/true);
}

void EmulatedStack::Stop() {
  for (auto it = procs_.rbegin(); it != procs_.rend(); ++it) {
    if (!it->second->Running()) continue;
    int st = it->second->Terminate(5000);
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
      std::fprintf(stderr, "warning: %s ignored SIGTERM for 5 s and was killed\n",
                   it->first.c_str());
    }
  }
}

EmulatedStack::~EmulatedStack() {
  Stop();
  if (!options_.keep && !dir_.empty()) {
    std::string cmd = "rm -rf '" + dir_ + "'";
    if (system(cmd.c_str()) != 0) {
    }
  }
}

}  // namespace gputravel
