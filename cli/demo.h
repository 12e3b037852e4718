#ifndef GPUTRAVEL_CLI_DEMO_H_
#define GPUTRAVEL_CLI_DEMO_H_

namespace gputravel {

// `gputravel demo`: runs a whole campaign on the emulated stack and reports
// every trip. Returns the process exit code.
int DemoCommand(int argc, char** argv);

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_DEMO_H_
