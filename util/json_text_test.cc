#include "util/json_text.h"

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(JsonTextTest, ValidTextParses) {
  auto j = ParseJsonText(R"({"a": 1, "b": [{"a": 2}, {"a": 3}], "c": {"a": 4}})", "f.json");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["b"][1]["a"], 3);
  EXPECT_EQ((*j)["c"]["a"], 4);
}

TEST(JsonTextTest, DuplicateTopLevelKeyIsNamed) {
  auto j = ParseJsonText(R"({"rounds": 5, "rounds": 1})", "f.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(j.status().message(), "f.json: rounds: appears twice in the same object");
}

TEST(JsonTextTest, DuplicateNestedKeyNamesItsPath) {
  auto j = ParseJsonText(R"({"x": {"seed": [1, {"a": 0}]},
                             "gpus": [{"name": "a"}, {"name": "b", "y": 1, "name": "c"}]})",
                         "mux.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message(), "mux.json: gpus[1].name: appears twice in the same object");
}

TEST(JsonTextTest, SyntaxErrorGivesBytePosition) {
  auto j = ParseJsonText("{\"name\": \"a\",\n \"gpu\": }", "c.json");
  ASSERT_FALSE(j.ok());
  const std::string m(j.status().message());
  EXPECT_EQ(m.rfind("c.json: invalid JSON at byte 23: ", 0), 0u) << m;
  EXPECT_NE(m.find("line 2"), std::string::npos) << m;
  EXPECT_NE(ParseJsonText("", "c.json").status().message().find("c.json: invalid JSON at byte"),
            std::string::npos);
  EXPECT_FALSE(ParseJsonText("{} x", "c.json").ok());
}

TEST(JsonTextTest, NoWhereGivesNoPrefix) {
  auto j = ParseJsonText(R"({"a": 1, "a": 2})", "");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message(), "a: appears twice in the same object");
}

}  // namespace
}  // namespace gputravel
