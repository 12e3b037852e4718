// A state database that cannot be written (a full disk), against the real
// daemons: the orchestrator's every commit fails as on a full file system
// (orchestrator/sqlite_db.h, GPUTRAVEL_FAILPOINT=while:disk_full:PATH) from
// the middle of a campaign until the test removes PATH. Meanwhile the GPU is
// left alone (no route, no re-key beyond the trip in flight's way home),
// the orchestrator retries the storage with a growing delay instead of
// spinning, and the API says what is going on: the campaign reads PAUSED
// with the storage error (`gputravel status` shows it) though PAUSED was
// never committed. Once the storage works the campaign goes on by itself
// and completes with every window trained exactly once.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "cli/emulated_stack.h"
#include "gtest/gtest.h"
#include "tests/operator_cli.h"
#include "tests/stack_campaign.h"
#include "util/files.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

// Lines of `path` that contain `needle`.
int CountLines(const std::string& path, const std::string& needle) {
  auto text = ReadFile(path);
  if (!text.ok()) return -1;
  int n = 0;
  size_t start = 0;
  while (start < text->size()) {
    size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    if (text->substr(start, end - start).find(needle) != std::string::npos) ++n;
    start = end + 1;
  }
  return n;
}

TEST(StorageFailureTest, AFullDiskLeavesTheGpuAloneShowsPausedAndTheCampaignGoesOn) {
  const std::string disk_full = TestTmpDir() + "/disk_full";
  std::remove(disk_full.c_str());
  StackOptions o;
  o.holders = 2;
  o.dataset_bytes = {2u << 20, 2u << 20};
  o.buffer_bytes = 1u << 20;  // two windows per holder and round
  o.chunk_bytes = 256u << 10;
  o.rounds = 4;
  o.eval_set = false;
  o.log_level = 1;
  // Children take the environment at start: only the orchestrator reads it.
  setenv("GPUTRAVEL_FAILPOINT", ("while:disk_full:" + disk_full).c_str(), 1);
  auto started = EmulatedStack::Start(o);
  unsetenv("GPUTRAVEL_FAILPOINT");
  ASSERT_TRUE(started.ok()) << started.status();
  EmulatedStack* stack = started->get();
  const std::string audit = stack->dir() + "/logs/mux-audit.jsonl";
  const std::string gpu_log = stack->logs().at("gpu");
  const std::string orch_log = stack->logs().at("orchestrator");
  auto routes = [&] { return CountLines(audit, "\"route\""); };
  auto rekeys = [&] { return CountLines(gpu_log, "new CC session"); };

  absl::Status run = CreateAndStartCampaign(stack, "storage-test");
  ASSERT_TRUE(run.ok()) << run;
  v1::Campaign c;
  ASSERT_TRUE(WaitForCampaign(stack, "demo", 120, [](const v1::Campaign& c) { return c.trips_ok() >= 2; }, &c))
      << v1::CampaignState_Name(c.state()) << " " << c.error();
  ASSERT_EQ(c.state(), v1::RUNNING) << c.error();

  // The disk fills in the middle of the campaign.
  const int routes_before = routes();
  const int rekeys_before = rekeys();
  ASSERT_TRUE(WriteFile(disk_full, "", 0600).ok());

  // The API says so: PAUSED, naming the storage error, though nothing
  // could be committed.
  ASSERT_TRUE(WaitForCampaign(
      stack, "demo", 60,
      [](const v1::Campaign& c) {
        return c.state() == v1::PAUSED &&
               c.error().find("database or disk is full") != std::string::npos;
      },
      &c))
      << v1::CampaignState_Name(c.state()) << " " << c.error();
  EXPECT_NE(c.error().find("the state database cannot be written: state database " +
                           stack->dir() + "/state/orchestrator.db"),
            std::string::npos)
      << c.error();
  EXPECT_NE(c.error().find("the GPU is left alone"), std::string::npos) << c.error();
  // The trip in flight finished its way home; from here on the GPU is left
  // alone while the orchestrator retries: three retries (1 + 2 + 4 s).
  ASSERT_TRUE(WaitForCampaign(
      stack, "demo", 60,
      [](const v1::Campaign& c) {
        return c.error().find("3 retries failed") != std::string::npos;
      },
      &c))
      << v1::CampaignState_Name(c.state()) << " " << c.error();
  EXPECT_EQ(c.state(), v1::PAUSED);
  const int routes_during = routes() - routes_before;
  const int rekeys_during = rekeys() - rekeys_before;
  // At most the trip in flight's route out and home, and its re-key.
  EXPECT_LE(routes_during, 2) << "routes while the disk was full";
  EXPECT_LE(rekeys_during, 1) << "re-keys while the disk was full";
  // What an operator sees.
  std::string out;
  EXPECT_EQ(RunOperatorCli(*stack, {"status", "demo"}, 60, &out), 0) << out;
  EXPECT_NE(out.find("PAUSED"), std::string::npos) << out;
  EXPECT_NE(out.find("database or disk is full"), std::string::npos) << out;
  // No spinning: a line per retry and per failed commit, not hundreds.
  const int error_lines = CountLines(orch_log, "database or disk is full");
  EXPECT_LE(error_lines, 40) << "log lines naming the full disk";
  std::printf("while the disk was full: %d MUX routes, %d re-keys, %d log lines naming it\n",
              routes_during, rekeys_during, error_lines);

  // Space returns: the campaign goes on by itself and completes.
  ASSERT_EQ(std::remove(disk_full.c_str()), 0);
  ASSERT_TRUE(WaitForCampaign(
      stack, "demo", 300,
      [](const v1::Campaign& c) {
        return c.state() == v1::COMPLETED || c.state() == v1::FAILED ||
               c.state() == v1::CANCELLED;
      },
      &c))
      << v1::CampaignState_Name(c.state()) << " " << c.error();
  c = GetStackCampaign(stack, "demo", /*include_trips=*/true);
  EXPECT_EQ(c.state(), v1::COMPLETED) << c.error();
  EXPECT_EQ(c.error(), "") << "the storage error is gone with the failure";

  // Nothing lost, nothing counted twice: every window trained once.
  EXPECT_EQ(c.bytes_provisioned(), c.bytes_total());
  EXPECT_EQ(c.trips_ok(), 2u * 2u * o.rounds);
  for (const v1::Trip& t : c.trips()) {
    EXPECT_NE(t.outcome(), "") << "trip " << t.id() << " unfinished";
    if (t.outcome() == "ok") {
      EXPECT_TRUE(t.digest_match() && t.scrub_verified() && t.rekeyed()) << t.id();
    } else {
      EXPECT_EQ(t.outcome(), "aborted") << t.id() << ": " << t.error();
      EXPECT_NE(t.error().find("by a failure to write the state database"), std::string::npos)
          << t.error();
      EXPECT_TRUE(t.scrub_verified() && t.rekeyed()) << t.id();
    }
  }
  // The record: the campaign never committed PAUSED, and its events say
  // what stopped it and for how long.
  bool storage_event = false;
  for (const v1::Event& e : RecordedEvents(stack, "demo")) {
    if (e.kind() == v1::CAMPAIGN_STATE) {
      EXPECT_NE(e.campaign_state(), v1::PAUSED) << e.message();
    }
    if (e.kind() == v1::RECOVERY &&
        e.message().find("the state database could not be written for") != std::string::npos) {
      storage_event = true;
      EXPECT_NE(e.message().find("database or disk is full"), std::string::npos) << e.message();
    }
  }
  EXPECT_TRUE(storage_event);
}

}  // namespace
}  // namespace gputravel
