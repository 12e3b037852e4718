#include "util/status_macros.h"

#include <string>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

absl::Status Fail(bool fail) {
  return fail ? absl::NotFoundError("gone") : absl::OkStatus();
}

absl::StatusOr<std::string> Value(bool fail) {
  if (fail) return absl::InvalidArgumentError("bad");
  return std::string("value");
}

absl::Status Steps(bool first, bool second, std::string* out) {
  GT_RETURN_IF_ERROR(Fail(first));
  GT_ASSIGN_OR_RETURN(std::string v, Value(second));
  GT_ASSIGN_OR_RETURN(*out, Value(false));  // two in one scope
  *out += "+" + v;
  return absl::OkStatus();
}

TEST(StatusMacrosTest, ReturnsTheFirstErrorUnchanged) {
  std::string out;
  absl::Status s = Steps(true, false, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "gone");
  s = Steps(false, true, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad");
  EXPECT_TRUE(out.empty());
}

TEST(StatusMacrosTest, AssignsOnSuccess) {
  std::string out;
  ASSERT_TRUE(Steps(false, false, &out).ok());
  EXPECT_EQ(out, "value+value");
}

}  // namespace
}  // namespace gputravel
