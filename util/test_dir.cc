#include "util/test_dir.h"

#include <stdlib.h>
#include <sys/un.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace gputravel {
namespace {

std::string MakeDirUnder(const std::string& base, absl::string_view prefix) {
  std::string tmpl = absl::StrCat(base, "/", prefix, "XXXXXX");
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::fprintf(stderr, "fatal: cannot make a test directory %s: %s\n", tmpl.c_str(),
                 std::strerror(errno));
    std::abort();
  }
  return tmpl;
}

}  // namespace

std::string TestTmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr && dir[0] != '\0' ? dir : "/tmp";
}

std::string MakeTestDir(absl::string_view prefix) { return MakeDirUnder(TestTmpDir(), prefix); }

std::string MakeSocketTestDir(absl::string_view prefix) {
  constexpr size_t kMaxPath = sizeof(sockaddr_un{}.sun_path) - 1;
  const std::string base = TestTmpDir();
  const size_t dir_length = base.size() + 1 + prefix.size() + 6;
  return MakeDirUnder(dir_length + kSocketNameRoom <= kMaxPath ? base : "/tmp", prefix);
}

TempDir::TempDir() : path_(MakeSocketTestDir("gputravel-")) {}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace gputravel
