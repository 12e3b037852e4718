// Power cut of the MUX daemon under a live campaign (P7, and P5's fencing):
// the vfio_mux process runs under tests/power_cut_preload.so with its route
// snapshot and its journal (the audit log) tracked, as its configuration
// names them. A first run counts the syncs the MUX asks for during the key
// keeper's trip; each later run cuts its power at one of them (every write
// it did not sync is lost: tests/power_cut_image.h). The orchestrator
// notices the dead MUX and pauses the campaign (a dead MUX is no evidence
// against a holder); the MUX starts again on what its disk kept, as systemd
// would start it, the operator resumes, and the campaign must complete with
// every invariant of tests/crash_fixture.h. Beyond those, of the MUX: the
// restarted MUX holds at least the highest fencing token its disk kept and
// refuses a lower one; its journal accepted tokens only in order; and it
// routed the GPU to a holder only on that holder's own trip, once every
// earlier trip had finished (its buffer scrubbed and verified, or made safe
// by recovery).
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "auth/identity.h"
#include "auth/tls_config.h"
#include "cli/emulated_stack.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/mux.grpc.pb.h"
#include "proto/orchestrator.grpc.pb.h"
#include "tests/crash_fixture.h"
#include "tests/gpu_contact.h"
#include "tests/power_cut_daemon.h"
#include "tests/power_cut_image.h"
#include "tests/stack_campaign.h"
#include "util/files.h"

namespace gputravel {
namespace {

constexpr char kMux[] = "mux";
constexpr char kGpu[] = "gpu0";
// Cut runs at most (each one is a campaign).
constexpr size_t kMostCuts = 12;

// One campaign whose MUX runs under the power cut.
struct MuxRun {
  CrashFixture f;
  power_cut::Config config;
  std::string state_file, audit_log;  // the MUX's durable state, from its configuration
};

// Starts the fixture (trips a, b, keeper, a: a holder's trip follows the
// keeper's), stops its MUX cleanly and starts it again under the preload,
// tracking its route snapshot and journal, with the power cut at sync
// `cut_at` (0: never); then starts the campaign.
absl::Status StartMuxUnderPowerCut(MuxRun* r, const std::string& name, long cut_at) {
  absl::Status s = StartCrashFixture(&r->f, {}, {3u << 20, 2u << 20});
  if (!s.ok()) return s;
  auto mux = ReadJsonFile(r->f.stack->deployment().config_path(kMux));
  if (!mux.ok()) return mux.status();
  r->state_file = mux->value("state_file", "");
  r->audit_log = mux->value("audit_log", "");
  if (r->state_file.empty() || r->audit_log.empty()) {
    return absl::InternalError("the MUX configuration names no state_file or audit_log");
  }
  // The orchestrator brings the idle GPU home as it starts: a MUX stopped
  // meanwhile would leave it not home, and the campaign would pause at
  // once.
  WaitForGpuContact(r->f.stack->OperatorClient().get());
  // Each prefix covers the file, its temporary (a snapshot's .tmp), its
  // predecessor (a compacted journal's .1) and its lock.
  s = RestartUnderPowerCut(&r->f, kMux, "mux-" + name, {r->state_file, r->audit_log}, cut_at, "",
                           &r->config);
  if (!s.ok()) return s;
  return CreateAndStartCampaign(r->f.stack.get(), "mux-power-cut");
}

// One accepted decision of the MUX's journal.
struct Accepted {
  double time = 0;  // seconds since the epoch
  std::string action, to;
  uint64_t token = 0;
};

// The journal's accepted decisions, its predecessor's (if compacted) first.
std::vector<Accepted> AcceptedDecisions(const MuxRun& r) {
  std::vector<Accepted> out;
  for (const std::string& path : {r.audit_log + ".1", r.audit_log}) {
    if (::access(path.c_str(), F_OK) != 0) continue;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        ADD_FAILURE() << path << ": not a journal line: " << line;
        continue;
      }
      if (j.value("result", "") != "ok" || j.value("gpu", "") != kGpu) continue;
      out.push_back({j.value("time", 0.0), j.value("action", ""), j.value("to", ""),
                     j.value("token", uint64_t{0})});
    }
  }
  return out;
}

uint64_t HighestToken(const std::vector<Accepted>& decisions) {
  uint64_t m = 0;
  for (const auto& d : decisions) m = std::max(m, d.token);
  return m;
}

// A client of the MUX with `role`'s certificate ("orchestrator" may route,
// "operator" may only read).
std::unique_ptr<v1::Mux::Stub> MuxClient(EmulatedStack* stack, const std::string& role) {
  auto channel = MakeSecureChannel(stack->mux_endpoint(), stack->tls({role, role}),
                                   Identity{kRoleMux, kMux});
  if (!channel.ok()) return nullptr;
  return v1::Mux::NewStub(*channel);
}

// The domain of holder `name`.
std::string DomainOf(EmulatedStack* stack, const std::string& name) {
  for (const auto& h : stack->deployment().holders) {
    if (h.name == name) return h.domain;
  }
  return "";
}

// The restarted MUX keeps the fencing token its disk kept: it holds at
// least `kept`, and refuses a route below it.
void ExpectFencingKept(EmulatedStack* stack, uint64_t kept) {
  auto reader = MuxClient(stack, kRoleOperator);
  ASSERT_NE(reader, nullptr);
  v1::GetRouteRequest get;
  get.set_gpu(kGpu);
  v1::GpuRoute route;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status s = reader->GetRoute(&ctx, get, &route);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GE(route.fencing_token(), kept) << "the restarted MUX forgot a journaled token";
  if (kept == 0) return;
  // What a stale orchestrator (or a replay of an earlier trip's request)
  // would send: the keeper's domain on the token before the kept one.
  auto router = MuxClient(stack, kRoleOrchestrator);
  ASSERT_NE(router, nullptr);
  v1::RouteRequest req;
  req.set_gpu(kGpu);
  req.set_domain(DomainOf(stack, "keeper"));
  req.set_fencing_token(kept - 1);
  v1::RouteResponse out;
  grpc::ClientContext ctx2;
  ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  s = router->Route(&ctx2, req, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << "a route on stale token " << kept - 1 << " was answered: " << s.error_message();
}

// Of the whole journal at the campaign's end: tokens accepted in order, and
// every route to a holder on that holder's trip, after every earlier trip
// finished.
void ExpectJournalInOrder(const MuxRun& r, const v1::Campaign& c) {
  std::map<std::string, std::string> holder_of;  // domain -> holder
  for (const auto& h : r.f.stack->deployment().holders) holder_of[h.domain] = h.name;
  std::map<uint64_t, std::string> trip_holder;
  for (const auto& t : c.trips()) trip_holder[t.id()] = t.holder();
  std::map<uint64_t, int64_t> finished_ms;
  for (const auto& e : AllEvents(r.f.stack.get())) {
    if (e.kind() == v1::TRIP_FINISHED) finished_ms[e.trip()] = e.time_unix_ms();
  }
  const std::vector<Accepted> decisions = AcceptedDecisions(r);
  ASSERT_FALSE(decisions.empty());
  uint64_t highest = 0;
  std::set<uint64_t> routed_out;  // tokens of routes to a holder
  for (const auto& d : decisions) {
    EXPECT_GE(d.token, highest) << d.action << " to '" << d.to << "' accepted on token "
                                << d.token << " after token " << highest;
    highest = std::max(highest, d.token);
    if (d.action != "route" || holder_of.count(d.to) == 0) continue;
    routed_out.insert(d.token);
    const std::string& holder = holder_of[d.to];
    ASSERT_TRUE(trip_holder.count(d.token)) << "GPU routed to " << holder << " on token "
                                            << d.token << ", which is no trip";
    EXPECT_EQ(trip_holder[d.token], holder) << "GPU routed to " << holder << " on trip "
                                            << d.token << " of " << trip_holder[d.token];
    // Event times are whole milliseconds, rounded down: a trip finished
    // before the route has a time no later than the route's.
    const double route_ms = d.time * 1000;
    for (const auto& [trip, who] : trip_holder) {
      if (trip >= d.token) break;
      ASSERT_TRUE(finished_ms.count(trip)) << "trip " << trip << " never finished";
      EXPECT_LE(static_cast<double>(finished_ms[trip]), route_ms)
          << "GPU routed to " << holder << " (trip " << d.token << ") before trip " << trip
          << " of " << who << " was scrubbed and finished";
    }
  }
  for (const auto& t : c.trips()) {
    if (t.outcome() == "ok") {
      EXPECT_EQ(routed_out.count(t.id()), 1u) << "trip " << t.id() << " of " << t.holder()
                                              << " counted, but its route out not journaled";
    }
  }
}

// The final campaign: at most the keeper's one interrupted trip aborted, and
// every invariant.
void CheckCampaign(MuxRun* r, const v1::Campaign& c) {
  int aborted = 0;
  for (const auto& t : c.trips()) {
    if (t.outcome() != "aborted") continue;
    ++aborted;
    EXPECT_EQ(t.holder(), "keeper") << "only the keeper's trip was interrupted";
  }
  EXPECT_LE(aborted, 1);
  // The journal first: trying the keeper's kept keys routes the GPU to it
  // on a token of the test's own.
  ExpectJournalInOrder(*r, c);
  CheckCrashInvariants(&r->f, c, aborted);
}

TEST(MuxDaemonPowerCutTest, AtEverySyncOfATripTheRestartedMuxKeepsFencingAndInvariants) {
  std::vector<SyncPoint> points;
  {
    MuxRun count;
    absl::Status s = StartMuxUnderPowerCut(&count, "count", 0);
    ASSERT_TRUE(s.ok()) << s;
    auto c = count.f.stack->WaitForFinal("demo", 120);
    ASSERT_TRUE(c.ok()) << c.status();
    CheckCampaign(&count, *c);
    points = KeeperTripSyncs(count.f, count.config, kMux);
    StopCrashFixture(&count.f);
  }
  // The trip's route out and route back are journaled, each with a sync.
  ASSERT_GE(points.size(), 2u);
  const std::vector<SyncPoint> chosen = ChooseSyncPoints(points, kMostCuts);
  for (const SyncPoint& p : chosen) {
    SCOPED_TRACE("MUX power cut at sync " + p.Describe());
    MuxRun r;
    absl::Status s = StartMuxUnderPowerCut(&r, "sync-" + std::to_string(p.n), p.n);
    ASSERT_TRUE(s.ok()) << s;
    RestoreAfterCut(&r.f, kMux, r.config);
    if (HasFatalFailure()) return;
    ExpectCutAt(r.f, r.config, p);
    const uint64_t kept = HighestToken(AcceptedDecisions(r));
    // The orchestrator noticed the dead MUX: the campaign paused, no holder
    // charged for it.
    v1::Campaign paused;
    ASSERT_TRUE(WaitForCampaign(
        r.f.stack.get(), "demo", 60,
        [](const v1::Campaign& c) { return c.state() == v1::PAUSED; }, &paused))
        << "not paused: " << v1::CampaignState_Name(paused.state()) << " " << paused.error();
    for (const auto& h : paused.holders()) {
      EXPECT_NE(h.state(), "failed") << h.name() << " charged for the MUX's power cut";
    }
    s = r.f.stack->Restart(kMux);
    ASSERT_TRUE(s.ok()) << "the MUX did not start on what its disk kept: " << s;
    ExpectFencingKept(r.f.stack.get(), kept);
    ASSERT_TRUE(ResumeCampaign(r.f.stack.get(), "demo")) << "the campaign could not be resumed";
    auto c = r.f.stack->WaitForFinal("demo", 120);
    ASSERT_TRUE(c.ok()) << c.status();
    CheckCampaign(&r, *c);
    std::printf("MUX cut at sync %s: token %llu kept, paused (%s), completed with %d trips\n",
                p.Describe().c_str(), static_cast<unsigned long long>(kept),
                paused.error().substr(0, 100).c_str(), c->trips_size());
    StopCrashFixture(&r.f);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace gputravel
