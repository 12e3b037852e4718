#include "util/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "absl/time/clock.h"

namespace gputravel {
namespace {
std::atomic<int> g_level{1};
std::atomic<LogFormat> g_format{LogFormat::kText};
std::mutex g_mu;
std::string& Prefix() {
  static std::string* p = new std::string("gputravel");
  return *p;
}
}  // namespace

void SetLogLevel(int level) { g_level = level; }
int LogLevel() { return g_level; }
void SetLogFormat(LogFormat format) { g_format = format; }
void SetLogPrefix(const std::string& prefix) {
  std::lock_guard<std::mutex> l(g_mu);
  Prefix() = prefix;
}

void LogLineAt(int level, const char* file, int line, const std::string& message) {
  const absl::Time now = absl::Now();
  std::lock_guard<std::mutex> l(g_mu);
  LogRecord r;
  r.time = now;
  r.level = level;
  r.party = Prefix();
  r.file = file != nullptr ? file : "";
  r.line = line;
  r.message = message;
  const std::string out = FormatLogRecord(r, g_format);
  std::fwrite(out.data(), 1, out.size(), stderr);
}

}  // namespace gputravel
