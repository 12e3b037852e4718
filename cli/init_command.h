#ifndef GPUTRAVEL_CLI_INIT_COMMAND_H_
#define GPUTRAVEL_CLI_INIT_COMMAND_H_

#include <string>

#include "cli/deployment.h"

namespace gputravel {

// `gputravel init DIR [--holders N] [--tdx] ...`: writes a whole deployment
// to DIR (cli/deployment.h WriteDeployment) and prints what to run next.
// Returns the process exit code: 0, 1 if the deployment cannot be written,
// 2 on bad usage.
int InitCommand(int argc, char** argv);

// What `init` prints after writing `deployment`: the next commands (an
// emulated deployment) or what the operator must supply (a TDX template).
std::string InitNextSteps(const Deployment& deployment);

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_INIT_COMMAND_H_
