#include "util/failpoint.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "util/log.h"

namespace gputravel {
namespace {

struct Spec {
  std::string name;
  long hit = 1;
  std::string switch_file;  // "while:NAME:PATH": PATH
  std::string hold_dir;     // "hold:DIR": DIR
};

const Spec& TheSpec() {
  static const Spec spec = [] {
    Spec s;
    const char* v = getenv("GPUTRAVEL_FAILPOINT");
    if (v == nullptr) return s;
    s.name = v;
    if (s.name.rfind("while:", 0) == 0) {
      const size_t colon = s.name.find(':', 6);
      if (colon != std::string::npos) {
        s.switch_file = s.name.substr(colon + 1);
        s.name.resize(colon);
      }
      return s;
    }
    if (s.name.rfind("hold:", 0) == 0) {
      s.hold_dir = s.name.substr(5);
      s.name.clear();  // no crash or error point matches
      return s;
    }
    size_t hash = s.name.find('#');
    if (hash != std::string::npos) {
      s.hit = std::strtol(s.name.c_str() + hash + 1, nullptr, 10);
      s.name.resize(hash);
    }
    return s;
  }();
  return spec;
}

std::atomic<long> hits{0};

bool Hit(const std::string& spec_name) {
  const Spec& s = TheSpec();
  if (s.name.empty() || s.name != spec_name) return false;
  return hits.fetch_add(1) + 1 == s.hit;
}

// CrashPoint(name) armed by a "hold:DIR" test: waits until released.
void HoldIfArmed(const std::string& dir, const std::string& name) {
  const std::string armed = dir + "/" + name;
  if (::access(armed.c_str(), F_OK) != 0) return;
  const std::string held = armed + ".held";
  if (::rename(armed.c_str(), held.c_str()) != 0) return;
  GT_LOG(0, "failpoint ", name, ": holding until ", held, " is removed");
  // Bounded: a test that never releases does not stop the daemon for good.
  int waited_ms = 0;
  while (::access(held.c_str(), F_OK) == 0 && waited_ms < 120000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    waited_ms += 5;
  }
  GT_LOG(0, "failpoint ", name, ": released after ", waited_ms, " ms; going on");
}

}  // namespace

bool FaultSwitchOn(const std::string& name) {
  const Spec& s = TheSpec();
  if (s.switch_file.empty() || s.name.size() != 6 + name.size() ||
      s.name.compare(6, std::string::npos, name) != 0) {
    return false;
  }
  return ::access(s.switch_file.c_str(), F_OK) == 0;
}

void CrashPoint(const std::string& name) {
  const Spec& s = TheSpec();
  if (!s.hold_dir.empty()) return HoldIfArmed(s.hold_dir, name);
  if (!Hit(name)) return;
  GT_LOG(0, "failpoint ", name, "#", TheSpec().hit, ": killing this process (SIGKILL)");
  ::kill(::getpid(), SIGKILL);
  ::_exit(137);  // not reached
}

absl::Status InjectedError(const std::string& name) {
  if (!Hit("error:" + name)) return absl::OkStatus();
  std::string what =
      "failpoint error:" + name + "#" + std::to_string(TheSpec().hit) + ": injected error";
  GT_LOG(0, what);
  return absl::UnavailableError(what);
}

}  // namespace gputravel
