#ifndef GPUTRAVEL_CLI_USER_PATH_H_
#define GPUTRAVEL_CLI_USER_PATH_H_

#include <string>

namespace gputravel {

// A path the user typed: as it is when absolute, else relative to the
// directory `bazel run` was started from (BUILD_WORKING_DIRECTORY), else to
// the working directory.
std::string UserPath(const std::string& path);

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_USER_PATH_H_
