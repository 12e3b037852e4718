// gputravel: the operator CLI.
#include <cstdio>
#include <cstring>
#include <string>

#include "auth/pki_command.h"
#include "cli/attest_command.h"
#include "cli/client_commands.h"
#include "cli/config_check.h"
#include "cli/demo.h"
#include "cli/init_command.h"
#include "cli/measure_command.h"
#include "cli/up_command.h"

namespace {

std::string Usage() {
  return std::string(
             "Usage: gputravel COMMAND [flags]\n"
             "\n"
             "GPU Travelling: one confidential-computing GPU travels between the trust\n"
             "domains of mutually distrusting data holders to train one model.\n"
             "\n"
             "Commands:\n"
             "  demo    Run a whole campaign on the emulated stack (GPU, MUX, holders,\n"
             "          orchestrator as separate processes) and report every trip.\n"
             "  init    Write a complete deployment to a directory: PKI, device and\n"
             "          attestation identities, every daemon's configuration, datasets,\n"
             "          a campaign spec (--tdx: a template for real hardware).\n"
             "  up      Start the daemons of a deployment `init` wrote, until Ctrl-C.\n"
             "  config  Check daemon configurations offline (config check FILE|DIR...).\n"
             "  pki     Create the campaign CA and issue mTLS certificates per identity\n"
             "          (pki init, pki issue, pki show).\n"
             "  measure Print the RTMR3 events a daemon extends for a binary and\n"
             "          configuration, for its peers to pin.\n"
             "  attest  Verify a TDX quote with Intel's collateral and a policy (attest\n"
             "          verify), or take one inside a TD (attest quote).\n") +
         gputravel::ClientCommandsHelp() +
         "  help    Print this help.\n"
         "\n"
         "Run `gputravel COMMAND --help` for the flags of a command (docs/cli.md).\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "help") == 0 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    std::printf("%s", Usage().c_str());
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  if (cmd == "demo") return gputravel::DemoCommand(argc, argv);
  if (cmd == "init") return gputravel::InitCommand(argc, argv);
  if (cmd == "up") return gputravel::UpCommand(argc, argv);
  if (cmd == "config") return gputravel::ConfigCommand(argc, argv);
  if (cmd == "pki") return gputravel::PkiCommand(argc, argv);
  if (cmd == "measure") return gputravel::MeasureCommand(argc, argv);
  if (cmd == "attest") return gputravel::AttestCommand(argc, argv);
  if (gputravel::IsClientCommand(cmd)) return gputravel::RunClientCommand(argc, argv);
  std::fprintf(stderr, "gputravel: unknown command '%s'\n\n%s", cmd.c_str(), Usage().c_str());
  return 2;
}
