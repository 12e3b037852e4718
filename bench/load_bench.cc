#include "bench/load_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "auth/identity.h"
#include "auth/pki.h"
#include "auth/tls_config.h"
#include "cli/emulated_stack.h"
#include "orchestrator/api_limits.h"
#include "cli/request_id.h"
#include "grpcpp/grpcpp.h"
#include "proto/orchestrator.grpc.pb.h"
#include "util/grpc_status.h"
#include "util/proc_stats.h"

namespace gputravel {
namespace bench {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One WatchCampaign stream on its own channel, read to its end.
class Watcher {
 public:
  Watcher(std::unique_ptr<v1::Orchestrator::Stub> stub, std::string campaign,
          std::atomic<uint64_t>* trips_done)
      : stub_(std::move(stub)), campaign_(std::move(campaign)), trips_done_(trips_done) {}

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  // Ends the stream (a campaign that paused never ends it) and waits.
  void Stop() {
    ctx_.TryCancel();
    if (thread_.joinable()) thread_.join();
  }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  bool opened() const { return opened_.load(); }
  // The stream has ended (the campaign is final, or it was refused or cut).
  bool ended() const { return done_.load(); }
  // The stream ended before any event (refused): its status.
  bool refused() const { return refused_.load(); }
  std::string error() const { return done_ ? error_ : ""; }
  // Every event arrived in order and whole (a trip's events name its
  // holder, PROVISIONED its total), the stream carried the final state and
  // `trips` TRIP_FINISHED events.
  bool Complete(uint64_t trips) const {
    return in_order_ && final_ && finished_ == trips;
  }

 private:
  void Run() {
    v1::WatchCampaignRequest req;
    req.set_name(campaign_);
    auto reader = stub_->WatchCampaign(&ctx_, req);
    v1::Event ev;
    int64_t last_seq = 0;
    while (reader->Read(&ev)) {
      opened_ = true;
      if (ev.seq() == 0) continue;  // live PROGRESS, not recorded
      if (ev.seq() <= last_seq) in_order_ = false;
      // Every trip's event names its holder; PROVISIONED carries its total.
      if (ev.trip() != 0 && ev.holder().empty()) in_order_ = false;
      if (ev.kind() == v1::PROVISIONED && (ev.total_bytes() == 0 || ev.bytes() != ev.total_bytes())) {
        in_order_ = false;
      }
      last_seq = ev.seq();
      if (ev.kind() == v1::TRIP_FINISHED) {
        ++finished_;
        if (trips_done_ != nullptr) ++*trips_done_;
      }
      if (ev.kind() == v1::CAMPAIGN_STATE &&
          (ev.campaign_state() == v1::COMPLETED || ev.campaign_state() == v1::FAILED ||
           ev.campaign_state() == v1::CANCELLED)) {
        final_ = true;
      }
    }
    grpc::Status st = reader->Finish();
    if (!st.ok()) error_ = st.error_message();
    if (!opened_.load() && !st.ok()) refused_ = true;
    done_ = true;
  }

  std::unique_ptr<v1::Orchestrator::Stub> stub_;
  const std::string campaign_;
  std::atomic<uint64_t>* trips_done_;
  grpc::ClientContext ctx_;
  std::thread thread_;
  std::atomic<bool> opened_{false};
  std::atomic<bool> refused_{false};
  std::atomic<bool> done_{false};
  std::string error_;  // written before done_
  // Written by the thread, read after Join/Stop.
  bool in_order_ = true;
  bool final_ = false;
  uint64_t finished_ = 0;
};

void Summarize(LoadResult* r) {
  if (r->samples.empty()) return;
  // Warm: every holder met once (its channel open), and a tenth of the trips done.
  r->warm_trips = std::max<uint64_t>(r->trips / 10, static_cast<uint64_t>(r->holders));
  std::vector<const LoadSample*> warm;
  for (const auto& s : r->samples) {
    if (!s.after_campaign && s.trips_done >= r->warm_trips && s.rss_kib > 0 &&
        s.open_files >= 0) {
      warm.push_back(&s);
    }
  }
  if (warm.empty()) return;
  r->rss_warm_kib = warm.front()->rss_kib;
  r->rss_end_kib = warm.back()->rss_kib;
  r->rss_end_over_warm = static_cast<double>(r->rss_end_kib) / r->rss_warm_kib;
  r->open_files_min = r->open_files_max = warm.front()->open_files;
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const LoadSample* s : warm) {
    r->open_files_min = std::min(r->open_files_min, s->open_files);
    r->open_files_max = std::max(r->open_files_max, s->open_files);
    const double x = static_cast<double>(s->trips_done), y = static_cast<double>(s->rss_kib);
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double den = n * sxx - sx * sx;
  if (n >= 2 && den > 0) r->rss_kib_per_100_trips = 100 * (n * sxy - sx * sy) / den;
}

}  // namespace

absl::StatusOr<LoadResult> RunLoad(const LoadOptions& options) {
  if (options.holders < 1 || options.rounds < 1 || options.watchers < 1 ||
      options.window_bytes < 4096 || options.window_bytes > (64u << 20)) {
    return absl::InvalidArgumentError(
        "load: holders, rounds and watchers at least 1; window 4 KiB to 64 MiB");
  }
  LoadResult r;
  r.holders = options.holders;
  r.rounds = options.rounds;
  r.watchers = options.watchers;
  StackOptions so;
  so.holders = options.holders;
  so.dataset_bytes.assign(options.holders, options.window_bytes);
  so.buffer_bytes = options.window_bytes;
  so.chunk_bytes = static_cast<uint32_t>(std::min<uint64_t>(options.window_bytes, 1u << 20));
  so.rounds = options.rounds;
  so.trainer = false;  // the control plane's load, not a model's
  so.eval_set = false;
  so.holder_training_policy["min_window_bytes"] = 32;
  so.bin_dir = options.bin_dir;
  so.log_level = 0;
  so.campaign = "load";
  auto t0 = std::chrono::steady_clock::now();
  auto started = EmulatedStack::Start(so);
  if (!started.ok()) return started.status();
  EmulatedStack& stack = **started;
  r.stack_start_seconds = SecondsSince(t0);
  Subprocess* orch = stack.process("orchestrator");
  if (orch == nullptr) return absl::InternalError("load: no orchestrator process");
  const pid_t pid = orch->pid();

  auto op = stack.OperatorClient();
  if (op == nullptr) return absl::InternalError("load: cannot build the operator's channel");
  std::string name;
  {
    v1::CreateCampaignRequest req;
    req.set_request_id(cli::RandomRequestId());
    req.set_spec_json(stack.CampaignSpec().dump());
    v1::CreateCampaignResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    absl::Status s = FromGrpc(op->CreateCampaign(&ctx, req, &resp), "orchestrator CreateCampaign");
    if (!s.ok()) return s;
    name = resp.campaign().name();
  }
  std::atomic<uint64_t> trips_done{0};
  std::vector<std::unique_ptr<Watcher>> watchers;
  // The orchestrator lets one caller identity hold kMaxWatchesPerCaller
  // streams: the watchers are schedulers load-watcher-1, -2, ..., each with
  // that many streams (on a channel of their own).
  std::vector<TlsFiles> identities;
  for (int i = 0; i < options.watchers; ++i) {
    if (i % kMaxWatchesPerCaller == 0) {
      const Identity id{kRoleScheduler,
                        "load-watcher-" + std::to_string(i / kMaxWatchesPerCaller + 1)};
      auto issued = IssueIdentity(stack.tls_dir(), id, 1);
      if (!issued.ok()) return issued.status();
      TlsFiles files = stack.tls({kRoleOperator, "operator"});
      files.cert = issued->cert;
      files.key = issued->key;
      identities.push_back(files);
    }
    auto channel = MakeSecureChannel(stack.orchestrator_endpoint(), identities.back(),
                                     Identity{kRoleOrchestrator, "orchestrator"});
    if (!channel.ok()) return channel.status();
    watchers.push_back(std::make_unique<Watcher>(v1::Orchestrator::NewStub(*channel), name,
                                                 i == 0 ? &trips_done : nullptr));
    watchers.back()->Start();
  }
  auto stop_watchers = [&] {
    for (auto& w : watchers) w->Stop();
  };
  // Every stream open (it has replayed the CREATED event) before the start.
  const auto open_by = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!std::all_of(watchers.begin(), watchers.end(), [](auto& w) { return w->opened(); })) {
    for (size_t i = 0; i < watchers.size(); ++i) {
      if (watchers[i]->refused()) {
        stop_watchers();
        return absl::ResourceExhaustedError("load: watcher " + std::to_string(i + 1) +
                                            " was refused: " + watchers[i]->error());
      }
    }
    if (std::chrono::steady_clock::now() > open_by) {
      stop_watchers();
      return absl::DeadlineExceededError("load: the watchers' streams did not open in 120 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  std::atomic<bool> over{false};
  t0 = std::chrono::steady_clock::now();
  const double cpu_before = ProcCpuSeconds(pid);
  std::thread sampler([&] {
    while (!over.load()) {
      LoadSample s;
      s.seconds = SecondsSince(t0);
      s.trips_done = trips_done.load();
      s.rss_kib = ProcStatusKib(pid, "VmRSS");
    s.rss_anon_kib = ProcStatusKib(pid, "RssAnon");
      s.rss_anon_kib = ProcStatusKib(pid, "RssAnon");
      s.open_files = ProcOpenFiles(pid);
      r.samples.push_back(s);  // read only after the join
      const auto next = t0 + std::chrono::duration<double>(s.seconds + options.sample_seconds);
      while (!over.load() && std::chrono::steady_clock::now() < next) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  });
  absl::StatusOr<v1::Campaign> final_campaign = absl::UnknownError("not started");
  {
    v1::CampaignRef ref;
    ref.set_name(name);
    v1::Campaign c;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    absl::Status s = FromGrpc(op->StartCampaign(&ctx, ref, &c), "orchestrator StartCampaign");
    if (s.ok()) {
      // The first watcher's stream ends when the campaign is final; a
      // campaign that pauses (it waits for an operator) is seen by its
      // state, read without its trips every few seconds. The trips are read
      // once, at the end: polling them would be a load of its own.
      const auto until = std::chrono::steady_clock::now() + std::chrono::hours(2);
      bool paused = false;
      while (!watchers[0]->ended() && !paused && std::chrono::steady_clock::now() < until) {
        for (int i = 0; i < 100 && !watchers[0]->ended(); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        v1::GetCampaignRequest req;
        req.set_name(name);
        v1::Campaign now;
        grpc::ClientContext sctx;
        sctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        paused = op->GetCampaign(&sctx, req, &now).ok() && now.state() == v1::PAUSED;
      }
    }
    final_campaign = s.ok() ? stack.WaitForFinal(name, 60, /*paused_ends_wait=*/true)
                            : absl::StatusOr<v1::Campaign>(s);
  }
  r.campaign_seconds = SecondsSince(t0);
  const double cpu_after = ProcCpuSeconds(pid);
  // A final campaign ends every stream; a paused one does not.
  if (final_campaign.ok() && final_campaign->state() != v1::PAUSED) {
    for (auto& w : watchers) w->Join();
  }
  stop_watchers();
  {  // the last look, after the campaign
    LoadSample s;
    s.seconds = SecondsSince(t0);
    s.trips_done = trips_done.load();
    s.rss_kib = ProcStatusKib(pid, "VmRSS");
    s.rss_anon_kib = ProcStatusKib(pid, "RssAnon");
    s.open_files = ProcOpenFiles(pid);
    s.after_campaign = true;
    over = true;
    sampler.join();
    r.samples.push_back(s);
  }
  if (!final_campaign.ok()) return final_campaign.status();
  r.state = v1::CampaignState_Name(final_campaign->state());
  for (const auto& t : final_campaign->trips()) {
    ++r.trips;
    if (t.outcome() != "ok" || !t.digest_match() || !t.scrub_verified() || !t.rekeyed()) {
      ++r.failed_trips;
    }
  }
  for (auto& w : watchers) r.watchers_complete += w->Complete(r.trips) ? 1 : 0;
  if (r.trips > 0 && cpu_before >= 0 && cpu_after >= 0) {
    r.orchestrator_cpu_seconds_per_trip = (cpu_after - cpu_before) / r.trips;
  }
  Summarize(&r);
  return r;
}

nlohmann::json LoadJson(const LoadResult& r) {
  nlohmann::json samples = nlohmann::json::array();
  for (const auto& s : r.samples) {
    samples.push_back({{"seconds", s.seconds},
                       {"trips_done", s.trips_done},
                       {"rss_kib", s.rss_kib},
                       {"rss_anon_kib", s.rss_anon_kib},
                       {"open_files", s.open_files},
                       {"after_campaign", s.after_campaign}});
  }
  return {{"holders", r.holders},
          {"rounds", r.rounds},
          {"watchers", r.watchers},
          {"stack_start_seconds", r.stack_start_seconds},
          {"campaign_seconds", r.campaign_seconds},
          {"state", r.state},
          {"trips", r.trips},
          {"failed_trips", r.failed_trips},
          {"watchers_complete", r.watchers_complete},
          {"warm_trips", r.warm_trips},
          {"rss_warm_kib", r.rss_warm_kib},
          {"rss_end_kib", r.rss_end_kib},
          {"rss_end_over_warm", r.rss_end_over_warm},
          {"rss_kib_per_100_trips", r.rss_kib_per_100_trips},
          {"open_files_min", r.open_files_min},
          {"open_files_max", r.open_files_max},
          {"orchestrator_cpu_seconds_per_trip", r.orchestrator_cpu_seconds_per_trip},
          {"samples", samples}};
}

std::string LoadText(const LoadResult& r) {
  char buf[512];
  std::string out;
  std::snprintf(buf, sizeof(buf),
                "%d holders x %u rounds, %d watchers: campaign %s, %llu trips, %llu failed, "
                "%d of %d watchers saw every trip and the end\n"
                "stack start %.1f s, campaign %.1f s (%.3f s/trip), orchestrator CPU %.4f "
                "s/trip\n"
                "after warm-up (%llu trips) until the end: RSS %lld -> %lld KiB (x%.3f, "
                "slope %.1f KiB per 100 trips), open files %lld..%lld\n\n",
                r.holders, r.rounds, r.watchers, r.state.c_str(),
                static_cast<unsigned long long>(r.trips),
                static_cast<unsigned long long>(r.failed_trips), r.watchers_complete, r.watchers,
                r.stack_start_seconds, r.campaign_seconds,
                r.trips > 0 ? r.campaign_seconds / r.trips : 0.0,
                r.orchestrator_cpu_seconds_per_trip,
                static_cast<unsigned long long>(r.warm_trips),
                static_cast<long long>(r.rss_warm_kib), static_cast<long long>(r.rss_end_kib),
                r.rss_end_over_warm, r.rss_kib_per_100_trips,
                static_cast<long long>(r.open_files_min),
                static_cast<long long>(r.open_files_max));
  out += buf;
  out += "seconds  trips  rss_kib  rss_anon_kib  open_files\n";
  for (const auto& s : r.samples) {
    std::snprintf(buf, sizeof(buf), "%7.1f %6llu %8lld %13lld %11lld%s\n", s.seconds,
                  static_cast<unsigned long long>(s.trips_done),
                  static_cast<long long>(s.rss_kib), static_cast<long long>(s.rss_anon_kib),
                  static_cast<long long>(s.open_files),
                  s.after_campaign ? "  (after the campaign, watchers gone)" : "");
    out += buf;
  }
  return out;
}

}  // namespace bench
}  // namespace gputravel
