#ifndef GPUTRAVEL_CLI_CLIENT_COMMANDS_H_
#define GPUTRAVEL_CLI_CLIENT_COMMANDS_H_

#include <string>

namespace gputravel {

// The operator/scheduler commands of `gputravel` that drive the
// orchestrator's gRPC API (proto/orchestrator.proto) over mutual TLS:
// create, start, pause, resume, cancel, status, watch, list, holders, gpus.
// docs/cli.md describes every command, flag, environment variable and exit
// code.

// Exit codes of every client command.
enum ClientExit {
  kExitOk = 0,              // Success (watch: the campaign COMPLETED).
  kExitFailed = 1,          // Campaign FAILED, or another server-side error.
  kExitUsage = 2,           // Bad flags, missing settings or files, invalid JSON.
  kExitNotFound = 3,        // NOT_FOUND.
  kExitRejected = 4,        // FAILED_PRECONDITION, ALREADY_EXISTS, INVALID_ARGUMENT.
  kExitUnreachable = 5,     // UNAVAILABLE, DEADLINE_EXCEEDED.
  kExitDenied = 6,          // UNAUTHENTICATED, PERMISSION_DENIED.
  kExitCancelled = 7,       // watch ended with the campaign CANCELLED.
};

// True for: create, start, pause, resume, cancel, status, watch, list,
// holders, gpus.
bool IsClientCommand(const std::string& cmd);

// One-line summaries for the top-level `gputravel --help` (one line per
// command, "  NAME    summary\n", aligned like the other commands).
std::string ClientCommandsHelp();

// argv[0]="gputravel", argv[1]=command; returns the process exit code.
// Output goes to stdout, errors to stderr as "gputravel CMD: message".
int RunClientCommand(int argc, char** argv);

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_CLIENT_COMMANDS_H_
