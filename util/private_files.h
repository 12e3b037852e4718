#ifndef GPUTRAVEL_UTIL_PRIVATE_FILES_H_
#define GPUTRAVEL_UTIL_PRIVATE_FILES_H_

#include <string>

#include "absl/status/status.h"

namespace gputravel {

// The modes of a daemon's durable state, whatever they were before (a file
// restored with `cp` under umask 022 is 0644).

// Refuses (FAILED_PRECONDITION) a `dir` that is not a directory, that neither
// this process's user nor root owns, or that its group or others may write: whoever may write it may replace the daemon's
// state under it. `what` names it in the message (e.g. "state_dir").
absl::Status RequirePrivateDirectory(const std::string& dir, const std::string& what);

// Makes `path` mode 0600 (fchmod on the file opened without following a
// symbolic link). With `create`, a missing file is created empty (0600);
// without, a missing file is fine and left missing.
absl::Status MakeFilePrivate(const std::string& path, bool create);

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_PRIVATE_FILES_H_
