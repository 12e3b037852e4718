#ifndef GPUTRAVEL_UTIL_TEST_DIR_H_
#define GPUTRAVEL_UTIL_TEST_DIR_H_

// Where tests write: Bazel's per-test TEST_TMPDIR (emptied before the test,
// kept with its outputs), and /tmp only when a test runs outside Bazel or
// needs a path too short for TEST_TMPDIR.

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace gputravel {

// TEST_TMPDIR, or /tmp when it is not set.
std::string TestTmpDir();

// A fresh empty directory (mode 0700) under TestTmpDir(), named `prefix`
// and six random characters. A directory that cannot be made ends the test
// binary, naming the path.
std::string MakeTestDir(absl::string_view prefix);

// Room a socket directory leaves for the names inside it (a subdirectory
// and a socket name, "/run/orchestrator.sock" and the like).
inline constexpr size_t kSocketNameRoom = 48;

// The same for a directory that holds Unix sockets, whose paths are at
// most 107 bytes (sun_path): under TestTmpDir() when it leaves
// kSocketNameRoom bytes for the names inside, else under /tmp. Bazel's
// TEST_TMPDIR in its sandbox is about 150 bytes, so there it is /tmp.
std::string MakeSocketTestDir(absl::string_view prefix);

// A directory made by MakeSocketTestDir("gputravel-"), removed with its
// contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_TEST_DIR_H_
