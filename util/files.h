#ifndef GPUTRAVEL_UTIL_FILES_H_
#define GPUTRAVEL_UTIL_FILES_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gputravel {

absl::StatusOr<std::string> ReadFile(const std::string& path);
// The directory `path` is in: "." for a bare name, "/" for a name in the
// root, else what comes before its last '/'.
std::string DirectoryOf(const std::string& path);
// Writes with the given mode (0600 for private keys), replacing what is there
// (a symbolic link is followed). The mode applies only to a new file.
absl::Status WriteFile(const std::string& path, const std::string& contents,
                       int mode = 0644);
// Creates `path` with `mode` (less the umask) and writes `contents`. Nothing
// that exists is ever followed, truncated or replaced: the file is created
// with O_CREAT|O_EXCL|O_NOFOLLOW, so an existing file or symbolic link
// (dangling or not) is refused at open time with ALREADY_EXISTS ("PATH
// already exists"). If a write or the close fails, the partial file is
// removed.
absl::Status WriteNewFile(const std::string& path, const std::string& contents, int mode);
// Reads a configuration file whose top level is a JSON object, refusing a
// syntax error or a duplicate key (util/json_text.h); errors name the file.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

// Typed field access for configuration: errors name `where` + field.
absl::StatusOr<std::string> JsonString(const nlohmann::json& j,
                                       const std::string& where,
                                       const std::string& field);
absl::StatusOr<uint64_t> JsonUint(const nlohmann::json& j, const std::string& where,
                                  const std::string& field);

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_FILES_H_
