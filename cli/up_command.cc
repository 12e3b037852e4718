#include "cli/up_command.h"

#include <cstdio>
#include <string>

#include "cli/deployment.h"
#include "cli/emulated_stack.h"
#include "cli/serve_until_stopped.h"
#include "cli/terminal_text.h"
#include "cli/user_path.h"
#include "util/files.h"
#include "util/flags.h"

namespace gputravel {

int UpCommand(int argc, char** argv) {
  Flags flags("gputravel up DIR",
              "Starts the daemons of the deployment `gputravel init` wrote to DIR, in the\n"
              "order DIR/deployment.json lists them (the emulated GPU, the MUX, each\n"
              "holder agent, the orchestrator), each with its configuration from DIR\n"
              "and once the one before it serves, and keeps them running until SIGTERM\n"
              "or Ctrl-C, which stops them all. Logs go to DIR/logs. Drive the\n"
              "orchestrator from another shell after `. DIR/operator.env`.\n"
              "Exit status: 0 stopped by a signal, 1 if a daemon cannot start or exits\n"
              "by itself (its log's end is printed), 2 on bad usage.");
  flags.Int("v", 1, 0, 3, "The daemons' log verbosity: 0 errors, 1 info, 2 debug, 3 trace.");
  flags.String("ready_file", "",
               "Once every daemon serves, write this file (mode 0600): a line `ready`, then "
               "`endpoint ADDRESS` (the orchestrator's).");
  absl::Status ps = flags.Parse(argc, argv, 2);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (ps.ok()) ps = flags.OnePositional("the deployment directory DIR");
  if (!ps.ok()) {
    std::fprintf(stderr, "gputravel up: %s (see --help)\n", TerminalSafe(ps.message()).c_str());
    return 2;
  }
  const std::string dir = UserPath(flags.positional()[0]);
  auto stack = EmulatedStack::StartDeployment(dir, flags.GetInt("v"));
  if (!stack.ok()) {
    std::fprintf(stderr, "gputravel up: %s\n", TerminalSafe(stack.status().message()).c_str());
    return 1;
  }
  const Deployment& d = (*stack)->deployment();
  std::printf("Serving: the orchestrator at %s (logs in %s/logs).\n"
              "In another shell: . %s, then gputravel create %s --start.\n"
              "Stop with Ctrl-C or SIGTERM.\n",
              d.orchestrator_endpoint.c_str(), d.dir.c_str(), d.operator_env_path().c_str(),
              d.campaign_spec_path().c_str());
  std::fflush(stdout);
  if (!flags.Get("ready_file").empty()) {
    const std::string ready = UserPath(flags.Get("ready_file"));
    const std::string tmp = ready + ".tmp";
    absl::Status s = WriteFile(tmp, "ready\nendpoint " + d.orchestrator_endpoint + "\n", 0600);
    if (s.ok() && std::rename(tmp.c_str(), ready.c_str()) != 0) {
      s = absl::UnavailableError("cannot rename " + tmp + " to " + ready);
    }
    if (!s.ok()) {
      std::fprintf(stderr, "gputravel up: --ready_file: %s\n",
                   TerminalSafe(s.message()).c_str());
      (*stack)->Stop();
      return 1;
    }
  }
  return ServeUntilStopped(**stack, "gputravel up");
}

}  // namespace gputravel
