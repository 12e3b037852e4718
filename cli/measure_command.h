#ifndef GPUTRAVEL_CLI_MEASURE_COMMAND_H_
#define GPUTRAVEL_CLI_MEASURE_COMMAND_H_

#include <string>

#include "absl/status/statusor.h"

namespace gputravel {

// `gputravel measure --daemon orchestrator|holder_agent --config FILE
// --binary FILE`: prints the RTMR3 events and value the daemon will have with
// that binary and configuration (keyxfer/runtime_measurement.h), as JSON
// with the "peer_rtmr3" object its peers put in their attestation section.
// Returns the process exit code (0, 1 if the files cannot be measured, 2 on
// bad usage).
int MeasureCommand(int argc, char** argv);

// The JSON MeasureCommand prints.
absl::StatusOr<std::string> MeasureReport(const std::string& daemon, const std::string& config,
                                          const std::string& binary);

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_MEASURE_COMMAND_H_
