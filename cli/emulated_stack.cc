#include "cli/emulated_stack.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "keyxfer/random.h"
#include "nlohmann/json.hpp"
#include "proto/orchestrator.grpc.pb.h"
#include "util/daemon.h"
#include "util/files.h"
#include "util/grpc_status.h"
#include "util/hex.h"

namespace gputravel {
namespace {

using json = nlohmann::json;

}  // namespace

std::map<std::string, std::string> EmulatedStack::logs() const {
  std::map<std::string, std::string> out;
  for (const auto& p : procs_) out[p.first] = deployment_.log_path(p.first);
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
  launch_[name] = {binary, config};
  procs_.emplace_back(name, std::make_unique<Subprocess>());
  return WaitReady(name);
}

absl::Status EmulatedStack::WaitReady(const std::string& name) {
  Subprocess* p = process(name);
  const std::string ready = deployment_.ready_path(name);
  const std::string log = deployment_.log_path(name);
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

absl::StatusOr<std::string> EmulatedStack::metrics_address(const std::string& name) const {
  auto ready = ReadFile(deployment_.ready_path(name));
  if (!ready.ok()) return ready.status();
  auto announced = AnnouncedAddress(*ready, "metrics");
  if (!announced.ok()) {
    return absl::NotFoundError(name + " announced no metrics address in its ready file");
  }
  return announced;
}

absl::StatusOr<std::string> EmulatedStack::Served(const std::string& name) {
  auto ready = ReadFile(deployment_.ready_path(name));
  if (!ready.ok()) return ready.status();
  auto announced = AnnouncedAddress(*ready, "listen");
  if (!announced.ok()) {
    return absl::InternalError(name + " announced no address in its ready file");
  }
  const std::string address = *announced;
  const std::string& path = launch_[name].second;
  auto config = ReadJsonFile(path);
  if (!config.ok()) return config.status();
  if ((*config)["listen"] != address) {
    (*config)["listen"] = address;
    absl::Status s = WriteFile(path, config->dump(2) + "\n", 0600);
    if (!s.ok()) return s;
  }
  return address;
}

absl::Status EmulatedStack::Restart(const std::string& name) {
  Subprocess* p = process(name);
  if (p == nullptr) return absl::NotFoundError("no daemon named " + name);
  if (p->Running()) return absl::FailedPreconditionError(name + " is still running");
  return WaitReady(name);
}

absl::StatusOr<std::unique_ptr<EmulatedStack>> EmulatedStack::Start(StackOptions options) {
  char tmpl[] = "/tmp/gputravel-XXXXXX";  // short: Unix socket paths are limited
  if (mkdtemp(tmpl) == nullptr) return absl::UnavailableError("cannot create a temporary directory");
  std::unique_ptr<EmulatedStack> st(new EmulatedStack());
  st->options_ = options;
  st->owns_dir_ = true;
  st->deployment_.dir = tmpl;  // removed by the destructor from here on
  auto written = WriteDeployment(tmpl, options);
  if (!written.ok()) return written.status();
  st->deployment_ = *std::move(written);
  absl::Status s = st->LaunchAll();
  if (!s.ok()) return s;
  return st;
}

absl::StatusOr<std::unique_ptr<EmulatedStack>> EmulatedStack::StartDeployment(
    const std::string& dir, int log_level) {
  auto read = ReadDeployment(dir);
  if (!read.ok()) return read.status();
  if (read->tdx) {
    return absl::FailedPreconditionError(
        dir + " holds a template for TDX hardware (`gputravel init --tdx`): its daemons run "
              "in their TDs and on the host, under the systemd units (docs/operations.md)");
  }
  std::unique_ptr<EmulatedStack> st(new EmulatedStack());
  st->options_.log_level = log_level;
  st->deployment_ = *std::move(read);
  absl::Status s = st->LaunchAll();
  if (!s.ok()) return s;
  return st;
}

absl::Status EmulatedStack::LaunchAll() {
  pki_ = deployment_.dev_pki();
  bool moved = false;  // an address chosen at start: the files are saved again
  for (const auto& dm : deployment_.daemons) {
    absl::Status s = Launch(dm.name, dm.program, dm.config);
    if (!s.ok()) return s;
    if (dm.name == "gpu") continue;
    auto served = Served(dm.name);
    if (!served.ok()) return served.status();
    if (dm.name == "mux") {
      if (*served != deployment_.mux_endpoint) {
        // The orchestrator measures its mux_endpoint: written, then pinned
        // again, before any holder or the orchestrator starts.
        deployment_.mux_endpoint = *served;
        const std::string path = deployment_.config_path("orchestrator");
        auto orch = ReadJsonFile(path);
        if (!orch.ok()) return orch.status();
        (*orch)["mux_endpoint"] = *served;
        s = WriteFile(path, orch->dump(2) + "\n", 0600);
        if (s.ok()) s = PinDeployment(deployment_, options_);
        if (!s.ok()) return s;
        moved = true;
      }
    } else if (dm.name == "orchestrator") {
      moved = moved || *served != deployment_.orchestrator_endpoint;
      deployment_.orchestrator_endpoint = *served;
    } else {
      for (auto& h : deployment_.holders) {
        if (h.name != dm.name) continue;
        moved = moved || *served != h.endpoint;
        h.endpoint = *served;
      }
      for (auto& h : deployment_.campaign_spec["holders"]) {
        if (h.value("name", "") == dm.name) h["endpoint"] = *served;
      }
      holder_names_.push_back(dm.name);
    }
  }
  return moved ? SaveDeployment(deployment_) : absl::OkStatus();
}

json EmulatedStack::CampaignSpec() const { return deployment_.campaign_spec; }

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
  if (owns_dir_ && !options_.keep && !deployment_.dir.empty()) {
    std::string cmd = "rm -rf '" + deployment_.dir + "'";
    if (system(cmd.c_str()) != 0) {
    }
  }
}

}  // namespace gputravel
