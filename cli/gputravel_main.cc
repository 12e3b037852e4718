// gputravel: the operator CLI.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/demo.h"

namespace {

const char kUsage[] =
    "Usage: gputravel COMMAND [flags]\n"
    "\n"
    "GPU Travelling: one confidential-computing GPU travels between the trust\n"
    "domains of mutually distrusting data holders to train one model.\n"
    "\n"
    "Commands:\n"
    "  demo    Run a whole campaign on the emulated stack (GPU, MUX, holders,\n"
    "          orchestrator as separate processes) and report every trip.\n"
    "  help    Print this help.\n"
    "\n"
    "Run `gputravel COMMAND --help` for the flags of a command.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "help") == 0 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    std::printf("%s", kUsage);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  if (cmd == "demo") return gputravel::DemoCommand(argc, argv);
  std::fprintf(stderr, "gputravel: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
