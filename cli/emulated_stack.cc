#include "cli/emulated_stack.h"

#include <limits.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <random>

#include "holder_agent/dataset.h"
#include "keyxfer/dev_attester.h"
#include "nlohmann/json.hpp"
#include "proto/orchestrator.grpc.pb.h"
#include "util/files.h"
#include "util/grpc_status.h"

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
  std::vector<std::pair<std::string, bool>> candidates;
  if (!override_dir.empty()) {
    candidates.push_back({override_dir, true});
    candidates.push_back({override_dir, false});
  }
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
      "orchestrator): run through `bazel run //:gputravel`, or pass --bin_dir");
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

absl::Status EmulatedStack::Launch(const std::string& name, const std::string& binary,
                                   const std::string& config) {
  auto proc = std::make_unique<Subprocess>();
  const std::string ready = dir_ + "/run/" + name + ".ready";
  const std::string log = dir_ + "/logs/" + name + ".log";
  absl::Status s = proc->Start({binary, "--config=" + config, "--ready_file=" + ready,
                                "--v=" + std::to_string(options_.log_level)},
                               log);
  if (!s.ok()) return s;
  Subprocess* p = proc.get();
  procs_.emplace_back(name, std::move(proc));
  s = WaitForFile(ready, p, name, 20000);
  if (!s.ok()) {
    return absl::Status(s.code(), std::string(s.message()) + "; its log ends with:\n" +
                                      LogTail(log));
  }
  return absl::OkStatus();
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
  std::vector<HolderConfig> holders;
  for (int i = 0; i < options.holders; ++i) {
    HolderConfig h;
    h.name = "holder-" + std::string(1, static_cast<char>('a' + i));
    h.domain = "td-" + h.name;
    h.endpoint = "unix:" + d + "/" + h.name + ".sock";
    holders.push_back(h);
    domains.push_back(h.domain);
  }
  for (const auto& h : options.extra_holders) domains.push_back(h.domain);
  auto pki = CreateDevPki(d + "/pki", kGpuSerial, domains);
  if (!pki.ok()) return pki.status();
  st->pki_ = *pki;

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
              {"admin_socket", d + "/device-admin.sock"}};
  absl::Status s = WriteJson(d + "/device.json", dev);
  if (!s.ok()) return s;
  s = st->Launch("gpu", Daemon(st->bin_dir_, 0), d + "/device.json");
  if (!s.ok()) return s;

  // The MUX.
  json mux = {{"listen", st->mux_endpoint()},
              {"backend", "emulated"},
              {"state_file", d + "/state/mux-routes.json"},
              {"audit_log", d + "/logs/mux-audit.jsonl"},
              {"gpus", json::array({{{"name", "gpu0"},
                                     {"admin_endpoint", st->device_admin_endpoint()}}})}};
  s = WriteJson(d + "/mux.json", mux);
  if (!s.ok()) return s;
  s = st->Launch("mux", Daemon(st->bin_dir_, 1), d + "/mux.json");
  if (!s.ok()) return s;

  // Holders and their datasets (llm.c shards; the third is a raw file).
  for (int i = 0; i < options.holders; ++i) {
    const HolderConfig& h = holders[i];
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
      std::mt19937 rng(1000 + i);
      std::vector<uint16_t> tokens(bytes / 2);
      for (auto& t : tokens) t = static_cast<uint16_t>(rng() % 50257);
      if (i == 2) {
        s = WriteFile(path, std::string(reinterpret_cast<char*>(tokens.data()), bytes), 0600);
      } else {
        s = WriteLlmcShard(path, tokens.data(), tokens.size());
      }
      if (!s.ok()) return s;
    }
    json hc = {{"name", h.name},
               {"domain", h.domain},
               {"listen", h.endpoint},
               {"dataset", {{"path", path}, {"format", format}}},
               {"device_endpoint", st->device_socket(h.domain)},
               {"threads", options.threads},
               {"bounce_dir", d + "/shm"},
               {"attestation", DevAttestation(st->pki_, h.domain, {HexEncode(*orch_mrtd)})}};
    s = WriteJson(d + "/" + h.name + ".json", hc);
    if (!s.ok()) return s;
    s = st->Launch(h.name, Daemon(st->bin_dir_, 2), d + "/" + h.name + ".json");
    if (!s.ok()) return s;
    st->holder_names_.push_back(h.name);
  }

  // The orchestrator.
  json hs = json::array();
  for (const auto& h : holders) {
    hs.push_back({{"name", h.name}, {"endpoint", h.endpoint}, {"domain", h.domain}});
  }
  for (const auto& h : options.extra_holders) {
    hs.push_back({{"name", h.name}, {"endpoint", h.endpoint}, {"domain", h.domain}});
  }
  json orch = {
      {"listen", "unix:" + d + "/orchestrator.sock"},
      {"domain", kOrchestratorDomain},
      {"state_dir", d + "/state"},
      {"mux_endpoint", st->mux_endpoint()},
      {"gpu", {{"name", "gpu0"},
               {"device_endpoint", st->device_socket(kOrchestratorDomain)},
               {"device_ca", st->pki_.device_ca_cert},
               {"serial", kGpuSerial}}},
      {"attestation", DevAttestation(st->pki_, kOrchestratorDomain, allowed_holders)},
      {"campaigns", json::array({{{"name", options.campaign},
                                  {"buffer_bytes", options.buffer_bytes},
                                  {"chunk_bytes", options.chunk_bytes},
                                  {"rounds", options.rounds},
                                  {"trip_timeout_seconds", options.trip_timeout_seconds},
                                  {"holders", hs}}})}};
  s = WriteJson(d + "/orchestrator.json", orch);
  if (!s.ok()) return s;
  s = st->Launch("orchestrator", Daemon(st->bin_dir_, 3), d + "/orchestrator.json");
  if (!s.ok()) return s;
  return st;
}

absl::StatusOr<v1::CampaignReport> EmulatedStack::RunCampaign() {
  auto stub = v1::Orchestrator::NewStub(MakeChannel("unix:" + dir_ + "/orchestrator.sock"));
  v1::RunCampaignRequest req;
  req.set_campaign(options_.campaign);
  v1::CampaignReport report;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(20));
  absl::Status s = FromGrpc(stub->RunCampaign(&ctx, req, &report), "orchestrator RunCampaign");
  if (!s.ok()) return s;
  return report;
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
