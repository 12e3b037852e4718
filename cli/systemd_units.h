#ifndef GPUTRAVEL_CLI_SYSTEMD_UNITS_H_
#define GPUTRAVEL_CLI_SYSTEMD_UNITS_H_

// The systemd units of deploy/systemd (units, drop-ins, sysusers and
// tmpfiles), built into the program so that `gputravel init --tdx` writes
// them beside the configurations that use their paths.

#include <vector>

namespace gputravel {

struct SystemdUnitFile {
  const char* path;  // relative to deploy/systemd, e.g. "gputravel-mux.service.d/sysfs-backend.conf"
  const char* text;  // the file as it is there
};

// Every file of //deploy/systemd:units, in that filegroup's order.
const std::vector<SystemdUnitFile>& SystemdUnits();

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_SYSTEMD_UNITS_H_
