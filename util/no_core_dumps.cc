#include "util/no_core_dumps.h"

#include <errno.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <cstring>
#include <string>

namespace gputravel {

absl::Status DisableCoreDumps() {
  struct rlimit none = {0, 0};
  if (::setrlimit(RLIMIT_CORE, &none) != 0) {
    return absl::InternalError(std::string("cannot set the core size limit to 0: ") +
                               std::strerror(errno));
  }
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    return absl::InternalError(std::string("cannot mark the process not dumpable: ") +
                               std::strerror(errno));
  }
  return absl::OkStatus();
}

}  // namespace gputravel
