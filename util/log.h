#ifndef GPUTRAVEL_UTIL_LOG_H_
#define GPUTRAVEL_UTIL_LOG_H_

#include <string>

#include "absl/strings/str_cat.h"

namespace gputravel {

// Minimal leveled logging to stderr: 0 = errors, 1 = info (default), 2 = debug,
// 3 = trace. Only public facts are logged: never keys, plaintext or evidence.
void SetLogLevel(int level);
int LogLevel();
void SetLogPrefix(const std::string& prefix);
void LogLine(int level, const std::string& line);

#define GT_LOG(level, ...)                                         \
  do {                                                             \
    if ((level) <= ::gputravel::LogLevel())                        \
      ::gputravel::LogLine((level), ::absl::StrCat(__VA_ARGS__));  \
  } while (0)

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_LOG_H_
