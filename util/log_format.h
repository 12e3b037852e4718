#ifndef GPUTRAVEL_UTIL_LOG_FORMAT_H_
#define GPUTRAVEL_UTIL_LOG_FORMAT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gputravel {

// How a daemon writes its log lines (--log_format).
enum class LogFormat {
  // "2026-11-26T21:30:00.123Z INFO orchestrator orchestrator/trip_runner.cc:42: message",
  // control characters in the party and message written as \n, \r, \t or \xNN,
  // so that no text can forge a second line.
  kText,
  // One JSON object per line: {"time", "level", "party", "source", "message"},
  // strings escaped by JSON's rules (invalid UTF-8 replaced by U+FFFD).
  kJson,
};

// "text" or "json"; anything else is INVALID_ARGUMENT naming both.
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name);

// ERROR, INFO, DEBUG, TRACE for levels 0..3 (below 0 is ERROR, above 3 TRACE).
absl::string_view LogLevelName(int level);

// `t` in ISO-8601 UTC with milliseconds: 2026-11-26T21:30:00.123Z.
std::string FormatLogTime(absl::Time t);

// One log line.
struct LogRecord {
  absl::Time time;
  int level = 1;
  absl::string_view party;    // who logs: "orchestrator", "holder hospital-a"
  absl::string_view file;     // source file ("" when unknown)
  int line = 0;               // source line
  absl::string_view message;
};

// `record` as one line in `format`, ending in '\n'.
std::string FormatLogRecord(const LogRecord& record, LogFormat format);

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_LOG_FORMAT_H_
