#include "tests/crash_fixture.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>
#include <utility>

#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "gtest/gtest.h"
#include "proto/device.grpc.pb.h"
#include "tests/stack_campaign.h"
#include "util/grpc_status.h"
#include "util/test_dir.h"

namespace gputravel {

absl::Status StartCrashFixture(CrashFixture* f, const std::map<std::string, std::string>& env,
                               const std::vector<uint64_t>& dataset_bytes) {
  f->dir = MakeSocketTestDir("gputravel-crash-");
  StackOptions o;
  o.holders = 2;
  o.buffer_bytes = 2u << 20;
  o.chunk_bytes = 512u << 10;
  o.copy_engines = 2;  // each window through two engines: two keys per hand-off to kill
  o.log_level = 1;
  if (!dataset_bytes.empty()) o.dataset_bytes = dataset_bytes;
  KeyKeepingHolder::AddTo(&o, "keeper", f->dir);
  // Children inherit the environment at start: only this run carries it,
  // not a restarted daemon.
  for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
  auto stack = EmulatedStack::Start(o);
  for (const auto& [name, value] : env) unsetenv(name.c_str());
  if (!stack.ok()) return stack.status();
  f->stack = std::move(*stack);
  auto keeper = KeyKeepingHolder::Serve(f->stack.get(), "keeper", f->dir);
  if (!keeper.ok()) return keeper.status();
  f->keeper = std::move(*keeper);
  return absl::OkStatus();
}

void StopCrashFixture(CrashFixture* f) {
  f->keeper.reset();
  if (f->stack) f->stack->Stop();
  f->stack.reset();
  (void)system(("rm -rf " + f->dir).c_str());
}

bool WaitForExit(Subprocess* p, double seconds) {
  auto until = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (p->Running()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::vector<v1::Event> AllEvents(EmulatedStack* stack) {
  return RecordedEvents(stack, "demo", nullptr);
}

void CheckCrashInvariants(EmulatedStack* stack, KeyKeepingHolder* keeper, const v1::Campaign& c,
                          const CrashExpectation& expected) {
  EXPECT_EQ(c.state(), v1::COMPLETED) << c.error();
  const std::vector<v1::Event> events = AllEvents(stack);
  // Trips whose GPU left the orchestrator (route_out committed).
  std::set<uint64_t> left;
  for (const auto& e : events) {
    if (e.kind() == v1::STEP && e.step() != v1::PLANNED) left.insert(e.trip());
  }
  std::set<uint64_t> ids;
  int aborted = 0, failed = 0;
  // Windows of ok trips, per holder and round.
  std::map<std::pair<std::string, uint32_t>, std::vector<std::pair<uint64_t, uint64_t>>> windows;
  for (const auto& t : c.trips()) {
    EXPECT_TRUE(ids.insert(t.id()).second) << "trip " << t.id() << " twice";
    EXPECT_TRUE(t.step() == v1::DONE || t.step() == v1::ABORTED)
        << "trip " << t.id() << " unfinished";
    if (expected.every_trip_scrubbed || left.count(t.id()) != 0) {
      // Once the GPU left, the trip ends only re-keyed and scrubbed (by its
      // own safe path, or by recovery).
      EXPECT_TRUE(t.scrub_verified()) << "trip " << t.id() << " not scrubbed: " << t.error();
      EXPECT_TRUE(t.rekeyed()) << "trip " << t.id() << " not re-keyed: " << t.error();
    }
    if (t.outcome() == "ok") {
      EXPECT_TRUE(t.digest_match()) << "trip " << t.id();
      windows[{t.holder(), t.round()}].push_back({t.window_offset(), t.window_length()});
    } else if (t.outcome() == "aborted") {
      ++aborted;
      EXPECT_EQ(t.step(), v1::ABORTED) << "trip " << t.id();
    } else {
      ++failed;
      EXPECT_EQ(t.outcome(), "failed") << "trip " << t.id() << ": " << t.error();
    }
  }
  if (expected.aborted >= 0) EXPECT_EQ(aborted, expected.aborted);
  if (expected.failed >= 0) EXPECT_EQ(failed, expected.failed) << "trips failed";
  EXPECT_EQ(c.trips_ok() + c.trips_failed(), static_cast<uint64_t>(c.trips_size()));
  // Each dataset covered by ok windows exactly once per round (a skipped
  // holder: a prefix of it, still once): every trip counted once.
  const nlohmann::json spec = nlohmann::json::parse(c.spec_json(), nullptr, false);
  const uint32_t rounds = spec.is_object() ? spec.value("rounds", 1u) : 1u;
  for (const auto& h : c.holders()) {
    const bool was_skipped = expected.skipped.count(h.name()) != 0;
    EXPECT_EQ(h.state(), was_skipped ? "skipped" : "done") << h.name() << ": " << h.error();
    for (uint32_t round = 0; round < rounds; ++round) {
      auto& w = windows[{h.name(), round}];
      std::sort(w.begin(), w.end());
      uint64_t at = 0;
      for (const auto& x : w) {
        EXPECT_EQ(x.first, at) << h.name() << " round " << round
                               << ": a window counted twice or missing";
        at = x.first + x.second;
      }
      if (!was_skipped) EXPECT_EQ(at, h.dataset_bytes()) << h.name() << " round " << round;
    }
  }
  // Scrubbed before the next holder: every trip finished (after its scrub
  // was verified, or recovery made it safe) before the next one was planned.
  ExpectTripsOneAtATime(events);
  // No key handed to the keeper still works, those of interrupted trips
  // included.
  auto tries = keeper->TryKeptKeys(stack);
  ASSERT_TRUE(tries.ok()) << tries.status();
  EXPECT_EQ(tries->accepted, 0);
  EXPECT_EQ(tries->other, 0);
  EXPECT_GT(tries->old_session_refused + tries->tag_refused, 0) << "no kept key was tried";
}

void CheckCrashInvariants(CrashFixture* f, const v1::Campaign& c, int expected_aborted) {
  CrashExpectation expected;
  expected.aborted = expected_aborted;
  CheckCrashInvariants(f->stack.get(), f->keeper.get(), c, expected);
}

v1::DeviceStatus DeviceStatusNow(EmulatedStack* stack) {
  auto admin = v1::DeviceAdmin::NewStub(MakeChannel(stack->device_admin_endpoint()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::DeviceStatus st;
  grpc::Status s = admin->GetStatus(&ctx, v1::GetStatusRequest(), &st);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return st;
}

}  // namespace gputravel
