#include "tests/crash_fixture.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>
#include <utility>

#include "grpcpp/grpcpp.h"
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

void CheckCrashInvariants(CrashFixture* f, const v1::Campaign& c, int expected_aborted) {
  EXPECT_EQ(c.state(), v1::COMPLETED) << c.error();
  std::set<uint64_t> ids;
  int aborted = 0;
  std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> windows;
  for (const auto& t : c.trips()) {
    EXPECT_TRUE(ids.insert(t.id()).second) << "trip " << t.id() << " twice";
    EXPECT_TRUE(t.scrub_verified()) << "trip " << t.id() << " not scrubbed";
    EXPECT_TRUE(t.rekeyed()) << "trip " << t.id() << " not re-keyed";
    if (t.outcome() == "aborted") {
      ++aborted;
      EXPECT_EQ(t.step(), v1::ABORTED);
    } else {
      EXPECT_EQ(t.outcome(), "ok") << "trip " << t.id() << ": " << t.error();
      EXPECT_TRUE(t.digest_match()) << "trip " << t.id();
      windows[t.holder()].push_back({t.window_offset(), t.window_length()});
    }
  }
  EXPECT_EQ(aborted, expected_aborted);
  EXPECT_EQ(c.trips_ok() + c.trips_failed(), static_cast<uint64_t>(c.trips_size()));
  // Each dataset covered by successful windows exactly once: counted once.
  for (const auto& h : c.holders()) {
    auto& w = windows[h.name()];
    std::sort(w.begin(), w.end());
    uint64_t at = 0;
    for (const auto& x : w) {
      EXPECT_EQ(x.first, at) << h.name() << ": window counted twice or missing";
      at = x.first + x.second;
    }
    EXPECT_EQ(at, h.dataset_bytes()) << h.name();
    EXPECT_EQ(h.state(), "done") << h.name();
  }
  // No key handed to the keeper still works, including one handed out in the
  // interrupted trip.
  auto tries = f->keeper->TryKeptKeys(f->stack.get());
  ASSERT_TRUE(tries.ok()) << tries.status();
  EXPECT_EQ(tries->accepted, 0);
  EXPECT_EQ(tries->other, 0);
  // Scrubbed before the next holder: every trip finished (after its scrub
  // was verified) before the next one was planned.
  ExpectTripsOneAtATime(AllEvents(f->stack.get()));
}

uint64_t MemoryWipes(EmulatedStack* stack) {
  auto admin = v1::DeviceAdmin::NewStub(MakeChannel(stack->device_admin_endpoint()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetStatusRequest req;
  v1::DeviceStatus st;
  EXPECT_TRUE(admin->GetStatus(&ctx, req, &st).ok());
  return st.memory_wipes();
}

}  // namespace gputravel
