#ifndef GPUTRAVEL_UTIL_LOG_H_
#define GPUTRAVEL_UTIL_LOG_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "util/log_format.h"

namespace gputravel {

// Leveled logging to stderr: 0 = errors, 1 = info (default), 2 = debug,
// 3 = trace. Each line carries the time (ISO-8601 UTC, milliseconds), the
// level, the party (SetLogPrefix: the daemon, "holder NAME", "gpu SERIAL"),
// the source file:line and the message, as text or one JSON object per line
// (util/log_format.h). Only public facts are logged: never keys, plaintext
// or evidence.
void SetLogLevel(int level);
int LogLevel();
void SetLogPrefix(const std::string& prefix);
void SetLogFormat(LogFormat format);
// One line at `level` from `file`:`line` (GT_LOG fills both in).
void LogLineAt(int level, const char* file, int line, const std::string& message);

#define GT_LOG(level, ...)                                                             \
  do {                                                                                 \
    if ((level) <= ::gputravel::LogLevel())                                            \
      ::gputravel::LogLineAt((level), __FILE__, __LINE__, ::absl::StrCat(__VA_ARGS__)); \
  } while (0)

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_LOG_H_
