#include "util/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

namespace gputravel {
namespace {
std::atomic<int> g_level{1};
std::mutex g_mu;
std::string& Prefix() {
  static std::string* p = new std::string("gputravel");
  return *p;
}
}  // namespace

void SetLogLevel(int level) { g_level = level; }
int LogLevel() { return g_level; }
void SetLogPrefix(const std::string& prefix) {
  std::lock_guard<std::mutex> l(g_mu);
  Prefix() = prefix;
}

void LogLine(int level, const std::string& line) {
  static const char* kNames[] = {"ERROR", "INFO", "DEBUG", "TRACE"};
  double t = std::chrono::duration<double>(
                 std::chrono::system_clock::now().time_since_epoch()).count();
  std::lock_guard<std::mutex> l(g_mu);
  std::fprintf(stderr, "%.3f %s %s: %s\n", t, kNames[level < 0 ? 0 : level > 3 ? 3 : level],
               Prefix().c_str(), line.c_str());
}

}  // namespace gputravel
