#ifndef GPUTRAVEL_BENCH_MACHINE_INFO_H_
#define GPUTRAVEL_BENCH_MACHINE_INFO_H_

#include <string>

namespace gputravel {
namespace bench {

// What the figures were measured on: they mean little without it.
struct MachineInfo {
  int nproc = 0;               // CPUs this process may run on (affinity)
  std::string cpu_model;       // first "model name" of /proc/cpuinfo
  std::string cpu_crypto_flags;  // aes, pclmulqdq, vaes, vpclmulqdq, avx2, avx512f present
  std::string kernel;          // uname -sr
  std::string openssl;         // OpenSSL_version(OPENSSL_VERSION)
  std::string load_average;    // /proc/loadavg first three fields, at collection time
  std::string build;           // "opt" when built with NDEBUG, else "fastbuild/dbg"
};

MachineInfo CollectMachineInfo();

// /proc/loadavg's 1, 5 and 15 minute averages ("" if unreadable).
std::string LoadAverage();

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_MACHINE_INFO_H_
