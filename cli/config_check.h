#ifndef GPUTRAVEL_CLI_CONFIG_CHECK_H_
#define GPUTRAVEL_CLI_CONFIG_CHECK_H_

#include <string>
#include <vector>

namespace gputravel {

// `gputravel config check FILE|DIR... [--kind K]`: checks daemon
// configurations offline, with each daemon's own parser
// (orchestrator/daemon_config.h, holder_agent/holder_config.h,
// vfio_mux/mux_config.h, device/emulated_gpu_config.h) and attestation
// reader (CheckAttestationConfig), then what a daemon only finds at start or
// at its first trip: placeholders left in ("REPLACE-WITH-..."), the modes of
// the configuration, its keys and its directories, the dataset, and, across
// the files checked together, that identities match (the device certificate
// chains to the orchestrator's device CA, the MUX's domains and callers name
// the orchestrator and the holders, the holders answer the orchestrator's
// name and trust its CA, the campaign names what the holders serve). A
// directory is a deployment `gputravel init` wrote: every file its
// deployment.json lists, and its campaign.json. Returns the exit code: 0
// every file passes, 1 any error (each on stderr, naming the file and the
// field), 2 on bad usage.
int ConfigCommand(int argc, char** argv);

// One file's result.
struct ConfigCheckResult {
  std::string file;
  std::string kind;                 // "orchestrator", "holder_agent", "vfio_mux",
                                    // "emulated_gpu", "campaign", "deployment"
  std::vector<std::string> errors;  // each "FILE: ..." (FILE: `file`)
  std::string summary;              // what passed, for the OK line
};

// Checks `files` (paths of files; directories expanded as above) together.
// `kind`, when not empty, is every file's kind instead of detecting it.
std::vector<ConfigCheckResult> CheckConfigs(const std::vector<std::string>& files,
                                            const std::string& kind);

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_CONFIG_CHECK_H_
