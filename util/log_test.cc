#include "util/log.h"

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gputravel {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void TearDown() override {
    SetLogLevel(1);
    SetLogFormat(LogFormat::kText);
    SetLogPrefix("gputravel");
  }
};

TEST_F(LogTest, JsonLineNamesPartyAndSource) {
  SetLogFormat(LogFormat::kJson);
  SetLogPrefix("holder hospital-a");
  testing::internal::CaptureStderr();
  GT_LOG(1, "window ", 3, " \"done\"\nnext");
  const int line = __LINE__ - 1;
  const std::string out = testing::internal::GetCapturedStderr();
  ASSERT_EQ(out.find('\n'), out.size() - 1) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["level"], "INFO");
  EXPECT_EQ(j["party"], "holder hospital-a");
  EXPECT_EQ(j["source"], "util/log_test.cc:" + std::to_string(line));
  EXPECT_EQ(j["message"], "window 3 \"done\"\nnext");
  EXPECT_EQ(j["time"].get<std::string>().size(), std::string("2026-11-26T21:30:00.123Z").size());
}

TEST_F(LogTest, TextLineStartsWithIsoTime) {
  SetLogPrefix("orchestrator");
  testing::internal::CaptureStderr();
  GT_LOG(0, "failed");
  const std::string out = testing::internal::GetCapturedStderr();
  // YYYY-MM-DDTHH:MM:SS.mmmZ ERROR orchestrator util/log_test.cc:N: failed
  ASSERT_GT(out.size(), 24u) << out;
  EXPECT_EQ(out[4], '-') << out;
  EXPECT_EQ(out[10], 'T') << out;
  EXPECT_EQ(out[19], '.') << out;
  EXPECT_EQ(out.substr(23, 8), "Z ERROR ") << out;
  EXPECT_NE(out.find(" orchestrator util/log_test.cc:"), std::string::npos) << out;
  EXPECT_NE(out.find(": failed\n"), std::string::npos) << out;
}

TEST_F(LogTest, LevelsAboveTheSetOneAreNotWritten) {
  SetLogLevel(2);
  testing::internal::CaptureStderr();
  GT_LOG(3, "trace");
  GT_LOG(2, "debug");
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.find("trace"), std::string::npos) << out;
  EXPECT_NE(out.find("DEBUG"), std::string::npos) << out;
}

}  // namespace
}  // namespace gputravel
