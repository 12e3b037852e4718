#include "tests/operator_cli.h"

#include <sys/wait.h>
#include <unistd.h>

#include "auth/identity.h"
#include "auth/tls_config.h"
#include "gtest/gtest.h"
#include "util/files.h"
#include "util/subprocess.h"

namespace gputravel {

int RunCli(const std::vector<std::string>& args, const std::string& log, double seconds,
           std::string* out, const std::string& stop_once) {
  out->clear();
  auto bin_dir = FindDaemonDir("");
  EXPECT_TRUE(bin_dir.ok()) << bin_dir.status();
  if (!bin_dir.ok()) return -1;
  std::vector<std::string> argv = {*bin_dir + "/cli/gputravel"};
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess p;
  absl::Status started = p.Start(argv, log);
  EXPECT_TRUE(started.ok()) << started;
  if (!started.ok()) return -1;
  if (!stop_once.empty()) {
    (void)WaitForFile(stop_once, &p, "gputravel", static_cast<int>(seconds * 1000));
    if (p.Running()) p.Terminate(30000);
  }
  for (int i = 0; i < seconds * 100 && p.Running(); ++i) usleep(10000);
  if (p.Running()) p.Terminate(1000);
  *out = ReadFile(log).value_or("");
  return WIFEXITED(p.exit_status()) ? WEXITSTATUS(p.exit_status()) : -1;
}

int RunOperatorCli(const EmulatedStack& stack, const std::vector<std::string>& args,
                   double seconds, std::string* out, const std::string& endpoint) {
  const TlsFiles op = stack.tls({kRoleOperator, "operator"});
  std::vector<std::string> argv = args;
  for (const std::string& f :
       {"--endpoint=" + (endpoint.empty() ? stack.orchestrator_endpoint() : endpoint),
        "--ca=" + op.ca, "--cert=" + op.cert, "--key=" + op.key}) {
    argv.push_back(f);
  }
  const std::string log = stack.dir() + "/operator-cli.log";
  ::unlink(log.c_str());  // this run's output only
  return RunCli(argv, log, seconds, out);
}

}  // namespace gputravel
