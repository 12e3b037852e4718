#ifndef GPUTRAVEL_CLI_CLIENT_COMMANDS_H_
#define GPUTRAVEL_CLI_CLIENT_COMMANDS_H_

#include <memory>
#include <string>
#include <vector>

#include "cli/command_context.h"
#include "util/flags.h"

namespace gputravel {

// The operator/scheduler commands of `gputravel` that drive the
// orchestrator's gRPC API (proto/orchestrator.proto) over mutual TLS:
// create, start, pause, resume, cancel, status, watch, list, holders, gpus.
// docs/cli.md describes every command, flag, environment variable and exit
// code. Each command group has its own file (campaign_commands, query_commands,
// watch); the connection and error reporting are cli/command_context.h.

// Exit codes: ClientExit (cli/command_context.h).

// True for: create, start, pause, resume, cancel, status, watch, list,
// holders, gpus.
bool IsClientCommand(const std::string& cmd);

// One-line summaries for the top-level `gputravel --help` (one line per
// command, "  NAME    summary\n", aligned like the other commands).
std::string ClientCommandsHelp();

// argv[0]="gputravel", argv[1]=command; returns the process exit code.
// Output goes to stdout, errors to stderr as "gputravel CMD: message".
int RunClientCommand(int argc, char** argv);

namespace cli {

// One client command parsed as `gputravel` parses it (its flags, the common
// ones, --timeout), for a program that runs a command's parts itself: the
// demo creates and follows its campaign with the `create` and `watch` code.
class ClientInvocation {
 public:
  // `args`: the command, then its arguments and flags. Nullptr after a
  // usage error, which is printed as `gputravel CMD: message` (*exit set);
  // nullptr with *exit 0 after --help (printed).
  static std::unique_ptr<ClientInvocation> Parse(const std::vector<std::string>& args,
                                                 int* exit);

  CommandContext& ctx() { return ctx_; }

 private:
  ClientInvocation(const CommandInfo& info, const std::string& usage);

  const CommandInfo& info_;
  Flags flags_;
  CommandContext ctx_;
};

}  // namespace cli

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_CLIENT_COMMANDS_H_
