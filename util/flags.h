#ifndef GPUTRAVEL_UTIL_FLAGS_H_
#define GPUTRAVEL_UTIL_FLAGS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace gputravel {

// A small command-line parser: `--name=value`, `--name value`, boolean
// `--name`, positional arguments, and a --help text generated from the
// declarations, so help and behaviour cannot drift apart.
class Flags {
 public:
  Flags(std::string program, std::string summary)
      : program_(std::move(program)), summary_(std::move(summary)) {}

  void String(const std::string& name, std::string default_value,
              const std::string& help);
  void Bool(const std::string& name, const std::string& help);
  // An integer flag: Parse() refuses a value that is not a whole number in
  // [min_value, max_value] (INVALID_ARGUMENT "flag --holders must be an
  // integer in 1..16, not '3x'"), so GetInt() of it is always in range.
  void Int(const std::string& name, int default_value, int min_value, int max_value,
           const std::string& help);

  // Parses argv[first..]; unknown flags and bad values of Int() flags are
  // errors. Sets help_requested().
  absl::Status Parse(int argc, char** argv, int first = 1);

  std::string Get(const std::string& name) const;
  bool IsSet(const std::string& name) const;
  // The value as an integer. For a flag declared with Int() it was checked by
  // Parse(). For any other flag the whole value must be a decimal integer
  // ("3x", "debug" and "" give 0): declare numeric flags with Int() so that a
  // bad value is a usage error instead.
  int GetInt(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // OK when exactly one positional argument was given; otherwise
  // INVALID_ARGUMENT naming it ("missing the directory DIR", "one directory
  // only, not 'x' as well"): `what` is "the directory DIR".
  absl::Status OnePositional(const std::string& what) const;
  bool help_requested() const { return help_; }
  std::string Help() const;

 private:
  struct Decl {
    std::string value;
    std::string help;
    bool is_bool = false;
    bool set = false;
    bool is_int = false;
    int min_value = 0;
    int max_value = 0;
  };
  std::string program_, summary_;
  std::map<std::string, Decl> decls_;
  std::vector<std::string> order_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_FLAGS_H_
