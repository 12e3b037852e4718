// Every daemon reads its configuration through the one checking reader
// (util/files.h ReadJsonFile): a key given twice is refused at start, exit
// status 2, with the same message naming the file and the key's path.

#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "auth/test_server.h"
#include "cli/emulated_stack.h"
#include "gtest/gtest.h"
#include "util/files.h"
#include "util/subprocess.h"

namespace gputravel {
namespace {

TEST(ConfigFilesTest, EveryDaemonRefusesAKeyGivenTwiceNamingItsPath) {
  auto bin_dir = FindDaemonDir("");
  ASSERT_TRUE(bin_dir.ok()) << bin_dir.status();
  TempDir t;
  int n = 0;
  for (const std::string daemon :
       {"orchestrator/orchestrator", "holder_agent/holder_agent", "vfio_mux/vfio_mux",
        "device/emulated_gpu_daemon"}) {
    const std::string cfg = t.path() + "/" + std::to_string(++n) + ".json";
    const std::string log_path = cfg + ".log";
    ASSERT_TRUE(WriteFile(cfg,
                          R"({"listen": "unix:/a.sock", "tls": {"ca": "ca.pem", "cert": "c.pem",
                              "ca": "other.pem"}})",
                          0600)
                    .ok());
    Subprocess p;
    ASSERT_TRUE(p.Start({*bin_dir + "/" + daemon, "--config=" + cfg}, log_path).ok());
    for (int i = 0; i < 2000 && p.Running(); ++i) usleep(10000);
    if (p.Running()) p.Terminate(1000);
    const std::string log = ReadFile(log_path).value_or("");
    ASSERT_TRUE(WIFEXITED(p.exit_status())) << daemon << ": status " << p.exit_status();
    EXPECT_EQ(WEXITSTATUS(p.exit_status()), 2) << daemon << "\n" << log;
    EXPECT_NE(log.find(cfg + ": tls.ca: appears twice in the same object"), std::string::npos)
        << daemon << "\n" << log;
  }
}

}  // namespace
}  // namespace gputravel
