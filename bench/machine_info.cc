#include "bench/machine_info.h"

#include <openssl/crypto.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

namespace gputravel {
namespace bench {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  if (!(in >> a >> b >> c)) return "";
  return a + " " + b + " " + c;
}

MachineInfo CollectMachineInfo() {
  MachineInfo m;
  // The CPUs this process may run on (taskset and cgroup cpusets honoured),
  // not every CPU the machine has online.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  m.nproc = ::sched_getaffinity(0, sizeof(allowed), &allowed) == 0
                ? CPU_COUNT(&allowed)
                : static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(cpuinfo, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = Trim(line.substr(0, colon));
    std::string value = Trim(line.substr(colon + 1));
    if (key == "model name" && m.cpu_model.empty()) m.cpu_model = value;
    if (key == "flags" && flags.empty()) {
      std::istringstream fs(value);
      std::string f;
      while (fs >> f) flags.insert(f);
    }
  }
  for (const char* f : {"aes", "pclmulqdq", "vaes", "vpclmulqdq", "avx2", "avx512f"}) {
    if (flags.count(f)) m.cpu_crypto_flags += (m.cpu_crypto_flags.empty() ? "" : " ") + std::string(f);
  }
  struct utsname u;
  if (::uname(&u) == 0) m.kernel = std::string(u.sysname) + " " + u.release;
  m.openssl = OpenSSL_version(OPENSSL_VERSION);
  m.load_average = LoadAverage();
#ifdef NDEBUG
  m.build = "opt";
#else
  m.build = "fastbuild/dbg (not optimised: run with -c opt for figures)";
#endif
  return m;
}

}  // namespace bench
}  // namespace gputravel
