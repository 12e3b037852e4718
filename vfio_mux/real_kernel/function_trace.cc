#include "vfio_mux/real_kernel/function_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "vfio_mux/sysfs/sysfs_fs.h"

namespace gputravel {
namespace {

constexpr char kTracing[] = "/sys/kernel/tracing/";

// One write(2), opened O_APPEND as `echo DATA >> FILE`: tracefs clears
// set_ftrace_filter on O_TRUNC (which SysfsFs::WriteFile uses), and appends
// to it otherwise.
absl::Status Write(const std::string& file, const std::string& data) {
  const std::string path = kTracing + file;
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return SysfsErrnoError(errno, "cannot open for writing", path);
  ssize_t n;
  do {
    n = write(fd, data.data(), data.size());
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  close(fd);
  if (n < 0) return SysfsErrnoError(err, absl::StrCat("writing '", data, "' to"), path);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FunctionTrace> FunctionTrace::Start(const std::vector<std::string>& functions) {
  absl::Status s = Write("tracing_on", "0");
  if (s.ok()) s = Write("current_tracer", "nop");
  // One function per write (the kernel takes one name per write call); each
  // appends to the filter, empty at boot.
  std::vector<std::string> traced;
  for (const std::string& f : functions) {
    if (!s.ok()) break;
    absl::Status added = Write("set_ftrace_filter", f);
    // EINVAL: not traceable (inlined or notrace); reported by Stop as -1.
    if (added.ok()) {
      traced.push_back(f);
    } else if (SysfsErrno(added) != EINVAL) {
      s = added;
    }
  }
  if (s.ok() && traced.empty()) {
    s = absl::NotFoundError("none of the functions is traceable");
  }
  if (s.ok()) s = Write("trace", "\n");  // clears the buffer
  if (s.ok()) s = Write("current_tracer", "function");
  if (s.ok()) s = Write("tracing_on", "1");
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("starting ftrace for ", absl::StrJoin(functions, ", "),
                                               ": ", s.message(), " (is tracefs mounted?)"));
  }
  return FunctionTrace(functions, traced);
}

absl::StatusOr<std::map<std::string, int>> FunctionTrace::Stop() {
  absl::Status s = Write("tracing_on", "0");
  if (!s.ok()) return s;
  absl::StatusOr<std::string> text = RealSysfsFs()->ReadFile(std::string(kTracing) + "trace");
  if (!text.ok()) return text.status();
  s = Write("current_tracer", "nop");
  if (!s.ok()) return s;
  std::map<std::string, int> calls;
  for (const std::string& f : functions_) calls[f] = -1;
  for (const std::string& f : traced_) calls[f] = 0;
  // Lines: "  task-PID  [CPU] flags  TIME: function <-caller".
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    size_t colon = line.find(": ");
    if (colon == absl::string_view::npos) continue;
    absl::string_view rest = line.substr(colon + 2);
    absl::string_view fn = rest.substr(0, rest.find(' '));
    auto it = calls.find(std::string(fn));
    if (it != calls.end()) ++it->second;
  }
  return calls;
}

}  // namespace gputravel
