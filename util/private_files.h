#ifndef GPUTRAVEL_UTIL_PRIVATE_FILES_H_
#define GPUTRAVEL_UTIL_PRIVATE_FILES_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gputravel {

// The modes of a daemon's durable state, whatever they were before (a file
// restored with `cp` under umask 022 is 0644).

// Whether a file or directory of user `uid` may hold a daemon's state or
// keys: this process's user or root (any other owner could read or replace
// it whatever its mode).
bool IsTrustedOwner(uid_t uid);

// Refuses (FAILED_PRECONDITION) a `dir` that is not a directory, that neither
// this process's user nor root owns, or that its group or others may write:
// whoever may write it may replace the daemon's state under it. The path to
// it is checked too: a symbolic link on the way that another user made (it
// could point at any state), or a directory above it that another user owns
// or that group or others may write without the sticky bit (they could move
// `dir` aside), is refused. `what` names it in the message (e.g.
// "state_dir").
absl::Status RequirePrivateDirectory(const std::string& dir, const std::string& what);

// A daemon's state directory: creates `dir` (mode 0700) if it is missing,
// checks it as RequirePrivateDirectory does, and makes its entry durable
// (fsyncs its parent, on every call, so a power cut cannot take the
// directory away with the state written into it). Errors (FAILED_PRECONDITION, or UNAVAILABLE
// for a failed sync) name `what` and `dir`.
absl::Status MakePrivateStateDirectory(const std::string& dir, const std::string& what);

// Makes `path` mode 0600 (fchmod on the file opened without following a
// symbolic link). With `create`, a missing file is created empty (0600);
// without, a missing file is fine and left missing.
absl::Status MakeFilePrivate(const std::string& path, bool create);

// Durable writes of a daemon's private state, mode 0600, never through a
// symbolic link; each is on disk (file and directory entry fsynced) when it
// returns OK. Errors (UNAVAILABLE) name the file. `contents` is not copied
// (it may be key material).
//
// Creates `path`, which must not exist (ALREADY_EXISTS otherwise, whatever
// is there: file, link or dangling link). A partial file is removed.
absl::Status CreatePrivateFileDurably(const std::string& path, absl::string_view contents);
// Replaces `path` whole: a crash leaves the old contents or the new, never a
// mix (written to `path`.tmp, fsynced, renamed over `path`).
absl::Status ReplacePrivateFileDurably(const std::string& path, absl::string_view contents);

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_PRIVATE_FILES_H_
