#include "cli/client_commands.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "cli/campaign_commands.h"
#include "cli/command_context.h"
#include "cli/query_commands.h"
#include "cli/watch.h"
#include "grpc/support/log.h"
#include "util/flags.h"

namespace gputravel {
namespace {

using cli::CommandContext;
using cli::CommandInfo;

const char kExitCodesHelp[] =
    "\nExit codes:\n"
    "  0  success (watch: the campaign COMPLETED)\n"
    "  1  the campaign FAILED, or the call failed on the orchestrator\n"
    "     (INTERNAL, UNKNOWN, ABORTED, ...)\n"
    "  2  usage error: bad flags or arguments, missing endpoint or TLS files,\n"
    "     unreadable or invalid JSON specification\n"
    "  3  NOT_FOUND (no such campaign)\n"
    "  4  rejected by the orchestrator: FAILED_PRECONDITION, ALREADY_EXISTS or\n"
    "     INVALID_ARGUMENT (its message names the state or field)\n"
    "  5  cannot reach the orchestrator: UNAVAILABLE or DEADLINE_EXCEEDED\n"
    "  6  UNAUTHENTICATED or PERMISSION_DENIED (certificate or role refused)\n"
    "  7  watch ended with the campaign CANCELLED\n"
    "  8  watch ended with the campaign PAUSED (it waits for an operator)\n"
    "\nEnvironment: GPUTRAVEL_ENDPOINT, GPUTRAVEL_CA, GPUTRAVEL_CERT, GPUTRAVEL_KEY\n"
    "and GPUTRAVEL_CRL give the defaults of --endpoint, --ca, --cert, --key and\n"
    "--crl.\n";

// Every command, in the order of `gputravel --help`: the campaign changes,
// status, watch, then the lists.
const std::vector<CommandInfo>& Commands() {
  static const std::vector<CommandInfo>* cmds = [] {
    std::vector<CommandInfo> all = cli::CampaignCommands();
    std::vector<CommandInfo> queries = cli::QueryCommands();
    all.push_back(queries[0]);
    all.push_back(cli::WatchCommand());
    all.insert(all.end(), queries.begin() + 1, queries.end());
    return new std::vector<CommandInfo>(std::move(all));
  }();
  return *cmds;
}

const CommandInfo* Find(const std::string& cmd) {
  for (const auto& c : Commands()) {
    if (c.name == cmd) return &c;
  }
  return nullptr;
}

void DiscardGrpcLog(gpr_log_func_args*) {}

}  // namespace

bool IsClientCommand(const std::string& cmd) { return Find(cmd) != nullptr; }

std::string ClientCommandsHelp() {
  std::string out;
  for (const auto& c : Commands()) {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "  %-8s%s\n", c.name.c_str(), c.summary.c_str());
    out += buf;
  }
  return out;
}

namespace cli {

ClientInvocation::ClientInvocation(const CommandInfo& info, const std::string& usage)
    : info_(info), flags_(usage, info.description), ctx_(info_, flags_) {
  info_.declare(flags_);
  CommonFlags(flags_);
}

std::unique_ptr<ClientInvocation> ClientInvocation::Parse(const std::vector<std::string>& args,
                                                          int* exit) {
  *exit = kExitUsage;
  if (args.empty()) {
    std::fprintf(stderr, "gputravel: missing command\n");
    return nullptr;
  }
  const CommandInfo* info = Find(args[0]);
  if (!info) {
    std::fprintf(stderr, "gputravel: unknown command '%s'\n", args[0].c_str());
    return nullptr;
  }
  std::string usage = "gputravel " + info->name + (info->args.empty() ? "" : " " + info->args);
  std::unique_ptr<ClientInvocation> inv(new ClientInvocation(*info, usage));
  Flags& flags = inv->flags_;
  std::vector<std::string> storage = {"gputravel"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : storage) argv.push_back(a.data());
  absl::Status ps = flags.Parse(static_cast<int>(argv.size()), argv.data(), 2);
  // --help wins even when another flag is wrong (Parse stops at the first error).
  bool help = flags.help_requested();
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") help = true;
  }
  if (help) {
    std::printf("%s%s", flags.Help().c_str(), kExitCodesHelp);
    std::fflush(stdout);
    *exit = kExitOk;
    return nullptr;
  }
  CommandContext& ctx = inv->ctx_;
  if (!ps.ok()) {
    ctx.Fail(kExitUsage, std::string(ps.message()));
    return nullptr;
  }
  int n = static_cast<int>(flags.positional().size());
  if (n < info->min_args || n > info->max_args) {
    std::string want = info->args.empty() ? "no arguments" : info->args;
    ctx.Fail(kExitUsage, "expected " + want + ", got " + std::to_string(n) +
                             " argument(s); usage: " + usage + " [flags] (see --help)");
    return nullptr;
  }
  const std::string t = flags.Get("timeout");
  char* end = nullptr;
  double secs = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || !(secs > 0) || secs > 86400 * 365) {
    ctx.Fail(kExitUsage, "--timeout must be a positive number of seconds");
    return nullptr;
  }
  ctx.set_timeout(std::chrono::milliseconds(static_cast<int64_t>(std::ceil(secs * 1000))));
  *exit = kExitOk;
  return inv;
}

}  // namespace cli

int RunClientCommand(int argc, char** argv) {
  // gRPC's own log lines would break the "gputravel CMD: message" error
  // format; every failure is reported from the call's status instead.
  // GRPC_VERBOSITY or GRPC_TRACE in the environment keep them for debugging.
  if (!std::getenv("GRPC_VERBOSITY") && !std::getenv("GRPC_TRACE")) {
    gpr_set_log_function(DiscardGrpcLog);
  }
  int rc = kExitUsage;
  auto inv = cli::ClientInvocation::Parse(std::vector<std::string>(argv + 1, argv + argc), &rc);
  if (inv != nullptr) rc = inv->ctx().info().run(inv->ctx());
  std::fflush(stdout);
  std::fflush(stderr);
  return rc;
}

}  // namespace gputravel
