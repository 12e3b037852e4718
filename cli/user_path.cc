#include "cli/user_path.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

namespace gputravel {

std::string UserPath(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  std::string base;
  if (const char* w = getenv("BUILD_WORKING_DIRECTORY")) base = w;
  if (base.empty()) {
    char buf[PATH_MAX];
    if (::getcwd(buf, sizeof(buf)) != nullptr) base = buf;
  }
  return base.empty() ? path : base + "/" + path;
}

}  // namespace gputravel
