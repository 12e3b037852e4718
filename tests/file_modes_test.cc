// File and socket modes of the daemons' state, whatever existed before: the
// orchestrator's database and its -wal/-shm files are 0600 even when
// restored 0644, so are its checkpoint key and a holder's freshness record,
// a state_dir others may write is refused, and each Unix
// socket's mode says who may connect (0660 mTLS, 0600 the emulated device's
// plaintext sockets).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "cli/emulated_stack.h"
#include "gtest/gtest.h"
#include "util/files.h"

namespace gputravel {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

TEST(FileModesTest, StateIsPrivateSocketsSayWhoMayConnect) {
  StackOptions o;
  o.holders = 1;
  o.dataset_bytes = {1u << 20};
  o.trainer = false;
  o.eval_set = false;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  const std::string d = (*stack)->dir();
  const std::string holder = (*stack)->holder_names()[0];

  // Sockets: the mTLS APIs 0660, the emulated PCIe bus and admin socket 0600.
  EXPECT_EQ(ModeOf(d + "/orchestrator.sock"), 0660u);
  EXPECT_EQ(ModeOf(d + "/mux.sock"), 0660u);
  EXPECT_EQ(ModeOf(d + "/device-admin.sock"), 0600u);
  EXPECT_EQ(ModeOf(d + "/dev/" + std::string(EmulatedStack::kOrchestratorDomain) + ".sock"),
            0600u);

  // The orchestrator's database restored with `cp` under umask 022, with
  // the -wal and -shm files of the same copy: all 0600 after a restart.
  const std::string db = d + "/state/orchestrator.db";
  ASSERT_EQ((*stack)->process("orchestrator")->Terminate(), 0);
  ASSERT_TRUE(WriteFile(db + "-wal", "", 0644).ok());
  for (const std::string& f : {db, db + "-wal"}) ASSERT_EQ(::chmod(f.c_str(), 0644), 0);
  ASSERT_TRUE((*stack)->Restart("orchestrator").ok());
  auto report = (*stack)->RunCampaign();  // writes through the WAL
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  for (const std::string& f : {db, db + "-wal", db + "-shm"}) {
    EXPECT_EQ(ModeOf(f), 0600u) << f;
  }
  // The checkpoint key the orchestrator made at its first start, and the
  // holder's record of the trips it accepted (written by the campaign).
  EXPECT_EQ(ModeOf(d + "/state/checkpoint.key"), 0600u);
  EXPECT_EQ(ModeOf(d + "/state-" + holder + "/freshness.json"), 0600u);
  EXPECT_EQ(ModeOf(d + "/state-" + holder), 0700u);

  // A state_dir others may write is refused at start (exit 2).
  ASSERT_EQ((*stack)->process("orchestrator")->Terminate(), 0);
  ASSERT_EQ(::chmod((d + "/state").c_str(), 0777), 0);
  absl::Status restarted = (*stack)->Restart("orchestrator");
  EXPECT_FALSE(restarted.ok());
  EXPECT_EQ(WEXITSTATUS((*stack)->process("orchestrator")->exit_status()), 2);
  auto log = ReadFile((*stack)->logs().at("orchestrator"));
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("state_dir " + d + "/state may be written by group or others (mode 0777)"),
            std::string::npos) << *log;
  ASSERT_EQ(::chmod((d + "/state").c_str(), 0700), 0);
}

}  // namespace
}  // namespace gputravel
