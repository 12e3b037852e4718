#ifndef GPUTRAVEL_CLI_COMMAND_CONTEXT_H_
#define GPUTRAVEL_CLI_COMMAND_CONTEXT_H_

#include <chrono>
#include <memory>
#include <string>

#include "google/protobuf/message.h"
#include "grpcpp/grpcpp.h"
#include "proto/orchestrator.grpc.pb.h"
#include "util/flags.h"

namespace gputravel {

// Exit codes of every client command.
enum ClientExit {
  kExitOk = 0,           // Success (watch: the campaign COMPLETED).
  kExitFailed = 1,       // Campaign FAILED, or another server-side error.
  kExitUsage = 2,        // Bad flags, missing settings or files, invalid JSON.
  kExitNotFound = 3,     // NOT_FOUND.
  kExitRejected = 4,     // FAILED_PRECONDITION, ALREADY_EXISTS, INVALID_ARGUMENT.
  kExitUnreachable = 5,  // UNAVAILABLE, DEADLINE_EXCEEDED.
  kExitDenied = 6,       // UNAUTHENTICATED, PERMISSION_DENIED.
  kExitCancelled = 7,    // watch ended with the campaign CANCELLED.
  kExitPaused = 8,       // watch ended with the campaign PAUSED.
};

namespace cli {

// "INVALID_ARGUMENT" for a gRPC code.
std::string CodeName(grpc::StatusCode c);
// The ClientExit of a failed call's code.
int ExitCodeFor(grpc::StatusCode c);

// Protobuf's JSON form with the proto field names and every primitive field,
// on one line.
std::string ToJson(const google::protobuf::Message& m);

// Declares the flags every client command takes: --endpoint, --ca, --cert,
// --key (defaults from GPUTRAVEL_ENDPOINT, _CA, _CERT, _KEY), --server_name,
// --timeout and --json.
void CommonFlags(Flags& f);
// The `declare` of a command without flags of its own.
void NoFlags(Flags& f);

struct CommandInfo;

// One command invocation: parsed flags, the mutual-TLS connection to the
// orchestrator, and error and output helpers.
class CommandContext {
 public:
  CommandContext(const CommandInfo& info, Flags& flags) : info_(info), flags_(flags) {}

  const std::string& cmd() const;
  const CommandInfo& info() const { return info_; }
  Flags& flags() { return flags_; }
  bool json() const { return flags_.IsSet("json"); }
  const std::string& endpoint() const { return endpoint_; }

  // Prints "gputravel CMD: msg" on stderr and returns `code`. Messages carry
  // text from the server and from files: escaped for the terminal as a whole
  // (TerminalSafe leaves already escaped text as it is).
  int Fail(int code, const std::string& msg);

  // Maps a failed call to its exit code and a message that says what to do.
  int RpcError(const grpc::Status& s, const std::string& what, const std::string& hint = "");

  // Checks the common flags and builds the mTLS channel; 0 or an exit code.
  int Connect();

  v1::Orchestrator::Stub& stub() { return *stub_; }

  // A context with the --timeout deadline.
  std::unique_ptr<grpc::ClientContext> Call();

  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

  // `doc` and a newline on stdout, flushed.
  void PrintJson(const std::string& doc);

 private:
  const CommandInfo& info_;
  Flags& flags_;
  std::string endpoint_;
  std::chrono::milliseconds timeout_{30000};
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
};

// One client command: its name, usage, help and what runs it.
struct CommandInfo {
  std::string name;
  std::string args;  // Positional arguments for the usage line.
  int min_args, max_args;
  std::string summary;  // One line for `gputravel --help`.
  std::string description;
  void (*declare)(Flags&);
  int (*run)(CommandContext&);
};

}  // namespace cli
}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_COMMAND_CONTEXT_H_
