#include "bench/trip_bench.h"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <vector>

#include <unistd.h>

#include "auth/tls_config.h"
#include "cli/emulated_stack.h"
#include "nlohmann/json.hpp"
#include "proto/mux.grpc.pb.h"
#include "util/grpc_status.h"
#include "util/proc_stats.h"

namespace gputravel {
namespace bench {
namespace {

using json = nlohmann::json;

struct TripMarks {
  double start = -1, routed_out = -1, routed_home = -1, done = -1;
};

// Orchestrator log lines are "<unix seconds, ms> <LEVEL> orchestrator: <msg>";
// a trip starts with "trip N: <holder> window [" and ends with
// "trip N <holder>: ..." (campaign runner).
void ReadOrchestratorMarks(const std::string& path, const std::string& holder,
                           std::map<uint64_t, TripMarks>* marks) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    size_t p = line.find("trip ", colon);
    if (p == std::string::npos) continue;
    p += 5;
    size_t q = p;
    while (q < line.size() && std::isdigit(static_cast<unsigned char>(line[q]))) ++q;
    if (q == p) continue;
    uint64_t trip = std::strtoull(line.substr(p, q - p).c_str(), nullptr, 10);
    double t = std::strtod(line.c_str(), nullptr);
    std::string rest = line.substr(q);
    if (rest.rfind(": " + holder + " window [", 0) == 0) (*marks)[trip].start = t;
    if (rest.rfind(" " + holder + ": ", 0) == 0) (*marks)[trip].done = t;
  }
}

// MUX audit lines: {"action":"route","to":<domain>,"token":<trip>,"time":<s>}.
void ReadMuxMarks(const std::string& path, const std::string& holder_domain,
                  const std::string& home_domain, std::map<uint64_t, TripMarks>* marks) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || j.value("action", "") != "route" ||
        j.value("result", "") != "ok" || !j.contains("token") || !j.contains("time")) {
      continue;
    }
    uint64_t token = j["token"].get<uint64_t>();
    double t = j["time"].get<double>();
    const std::string to = j.value("to", "");
    if (to == holder_domain) (*marks)[token].routed_out = t;
    if (to == home_domain && marks->count(token)) (*marks)[token].routed_home = t;
  }
}

// Bounce-ring mappings (deleted /dev/shm files) in a process; false when its
// maps cannot be read (a live process always has some): the daemons are not
// dumpable (util/no_core_dumps.h), so reading another's maps takes
// CAP_SYS_PTRACE.
bool CountBounceMappings(int pid, uint64_t* count, uint64_t* bytes) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  bool any = false;
  while (std::getline(in, line)) {
    any = true;
    if (line.find("gputravel-bounce-") == std::string::npos) continue;
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx", &lo, &hi) == 2) {
      ++*count;
      *bytes += hi - lo;
    }
  }
  return any;
}

}  // namespace

absl::StatusOr<TripBenchResult> MeasureTrips(const TripBenchOptions& options) {
  TripBenchResult r;
  StackOptions so;
  so.holders = 1;
  so.dataset_bytes = {options.window_bytes};
  so.buffer_bytes = options.window_bytes;
  so.chunk_bytes = options.chunk_bytes != 0 ? options.chunk_bytes
                                            : static_cast<uint32_t>(options.window_bytes);
  if (options.gpu_memory_bytes != 0) so.gpu_memory_bytes = options.gpu_memory_bytes;
  // The trip's cost at any window size: nothing is trained, so the holders'
  // minimum window (a bound on what a loss tells) is the smallest there is.
  so.holder_training_policy["min_window_bytes"] = 32;
  so.rounds = options.rounds;
  so.bin_dir = options.bin_dir;
  so.tcp_loopback = options.tcp_loopback;
  r.transport = options.tcp_loopback ? "tcp-loopback" : "unix";
  so.log_level = 1;  // the phase marks are INFO lines
  // The control plane only: training is the trainer's work, not the trip's
  // (route out, hand-off, provision, route back, re-key, scrub).
  so.trainer = false;
  so.campaign = "bench";
  auto t0 = std::chrono::steady_clock::now();
  auto stack = EmulatedStack::Start(so);
  if (!stack.ok()) return stack.status();
  r.stack_start_seconds = SecondsSince(t0);

  std::vector<std::string> daemons = {"gpu", "mux", "orchestrator"};
  for (const auto& h : (*stack)->holder_names()) daemons.push_back(h);
  std::map<std::string, double> cpu_before;
  for (const auto& d : daemons) {
    if (Subprocess* p = (*stack)->process(d)) cpu_before[d] = ProcCpuSeconds(p->pid());
  }
  t0 = std::chrono::steady_clock::now();
  auto report = (*stack)->RunCampaign();
  r.campaign_seconds = SecondsSince(t0);
  if (!report.ok()) return report.status();
  for (const auto& d : daemons) {
    Subprocess* p = (*stack)->process(d);
    if (p == nullptr || cpu_before[d] < 0) continue;
    const double after = ProcCpuSeconds(p->pid());
    if (after >= 0 && report->trips_size() > 0) {
      r.cpu_seconds_per_trip[d] = (after - cpu_before[d]) / report->trips_size();
    }
  }
  if (report->trips_size() == 0) {
    return absl::InternalError("campaign made no trip: " + report->error());
  }
  if (report->state() != v1::COMPLETED) {
    return absl::InternalError("campaign " + v1::CampaignState_Name(report->state()) + ": " +
                               report->error());
  }
  std::vector<double> trip_s, holder_s, orch_s;
  for (const auto& t : report->trips()) {
    ++r.trips;
    if (t.outcome() != "ok" || !t.digest_match() || !t.scrub_verified()) {
      ++r.failed_trips;
      continue;
    }
    // The orchestrator's own monotonic measure of the trip (microseconds).
    const double trip_seconds = t.seconds();
    trip_s.push_back(trip_seconds);
    holder_s.push_back(t.provision_seconds());
    orch_s.push_back(trip_seconds - t.provision_seconds());
  }
  r.trip_seconds = Summarize(trip_s);
  r.holder_seconds = Summarize(holder_s);
  r.orchestrator_seconds = Summarize(orch_s);

  const std::string holder = (*stack)->holder_names().at(0);
  const std::string holder_domain = "td-" + holder;
  std::map<uint64_t, TripMarks> marks;
  const auto logs = (*stack)->logs();
  ReadOrchestratorMarks(logs.at("orchestrator"), holder, &marks);
  ReadMuxMarks((*stack)->dir() + "/logs/mux-audit.jsonl", holder_domain,
               EmulatedStack::kOrchestratorDomain, &marks);
  double setup = 0, away = 0, back = 0;
  for (const auto& m : marks) {
    const TripMarks& k = m.second;
    if (k.start < 0 || k.routed_out < 0 || k.routed_home < 0 || k.done < 0) continue;
    ++r.phase_trips;
    setup += k.routed_out - k.start;
    away += k.routed_home - k.routed_out;
    back += k.done - k.routed_home;
  }
  if (r.phase_trips > 0) {
    r.setup_mean = setup / r.phase_trips;
    r.away_mean = away / r.phase_trips;
    r.return_mean = back / r.phase_trips;
  }

  if (Subprocess* gpu = (*stack)->process("gpu")) {
    r.device_maps_readable =
        CountBounceMappings(gpu->pid(), &r.device_bounce_mappings, &r.device_bounce_bytes);
  }

  // MUX Route against the live stack: fencing tokens above every trip's.
  auto mux_channel = MakeSecureChannel((*stack)->mux_endpoint(),
                                       (*stack)->tls({kRoleOrchestrator, "orchestrator"}),
                                       Identity{kRoleMux, "mux"});
  if (!mux_channel.ok()) return mux_channel.status();
  auto mux = v1::Mux::NewStub(*mux_channel);
  uint64_t token = 1;
  {
    v1::GetRouteRequest req;
    req.set_gpu("gpu0");
    v1::GpuRoute route;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    absl::Status s = FromGrpc(mux->GetRoute(&ctx, req, &route), "MUX GetRoute");
    if (!s.ok()) return s;
    token = route.fencing_token() + 1;
  }
  std::vector<double> route_s;
  for (int i = 0; i < options.route_samples; ++i) {
    v1::RouteRequest req;
    req.set_gpu("gpu0");
    req.set_domain(i % 2 == 0 ? holder_domain : EmulatedStack::kOrchestratorDomain);
    req.set_fencing_token(token++);
    v1::RouteResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto r0 = std::chrono::steady_clock::now();
    absl::Status s = FromGrpc(mux->Route(&ctx, req, &resp), "MUX Route");
    double dt = SecondsSince(r0);
    if (!s.ok()) return s;
    route_s.push_back(dt);
  }
  r.mux_route_seconds = Summarize(route_s);
  return r;
}

}  // namespace bench
}  // namespace gputravel
