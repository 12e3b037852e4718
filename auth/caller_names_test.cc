#include "auth/caller_names.h"

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(CallerNamesTest, ParsesANonEmptyListOfValidNames) {
  absl::StatusOr<std::set<std::string>> n =
      ParseCallerNames(nlohmann::json::array({"orch-1", "orch-2"}), "h.json: orchestrator_names");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, (std::set<std::string>{"orch-1", "orch-2"}));
  for (const nlohmann::json& bad :
       {nlohmann::json::array(), nlohmann::json("orch"), nlohmann::json(),
        nlohmann::json::array({"Orch"}), nlohmann::json::array({1}),
        nlohmann::json::array({"a", "a"})}) {
    absl::StatusOr<std::set<std::string>> r = ParseCallerNames(bad, "h.json: orchestrator_names");
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_EQ(r.status().message().rfind("h.json: orchestrator_names", 0), 0u) << r.status();
  }
}

TEST(CallerNamesTest, OnlyTheNamedIdentitiesOfARestrictedRolePass) {
  const CallerNames names = {{"orchestrator", {"orch-1"}}};
  EXPECT_TRUE(CheckCallerName({"orchestrator", "orch-1"}, names).ok());
  grpc::Status s = CheckCallerName({"orchestrator", "orch-2"}, names);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message().find("orch-1"), std::string::npos) << "names the accepted ones";
  EXPECT_TRUE(CheckCallerName({"operator", "anyone"}, names).ok()) << "role not restricted";
  EXPECT_TRUE(CheckCallerName({"orchestrator", "x"}, {}).ok());
}

}  // namespace
}  // namespace gputravel
