#include "util/daemon_main.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "util/log.h"

namespace gputravel {
namespace {

// Runs ParseDaemonArgsOrExit on `args` (after the program name).
DaemonArgs Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "test_daemon");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return ParseDaemonArgsOrExit(static_cast<int>(args.size()), argv.data(), "test_daemon",
                               "A daemon under test.");
}

TEST(DaemonMainDeathTest, UnknownLogFormatIsAUsageError) {
  EXPECT_EXIT(Parse({"--config=/x.json", "--log_format=xml"}), ::testing::ExitedWithCode(2),
              "test_daemon: --log_format must be 'text' or 'json', not 'xml'");
  EXPECT_EXIT(Parse({"--config=/x.json", "--log_format="}), ::testing::ExitedWithCode(2),
              "--log_format must be 'text' or 'json', not ''");
}

TEST(DaemonMainDeathTest, HelpNamesLogFormat) {
  EXPECT_EXIT(
      {
        // --help prints to stdout; the death test reads stderr.
        ::dup2(STDERR_FILENO, STDOUT_FILENO);
        Parse({"--help"});
      },
      ::testing::ExitedWithCode(0), "--log_format.*text.*json");
}

TEST(DaemonMainDeathTest, StartupErrorsFollowTheLogFormat) {
  EXPECT_EXIT(
      {
        Parse({"--config=/x.json"});
        ExitStartupError("test_daemon", "/x.json: missing field 'name'");
      },
      ::testing::ExitedWithCode(2), "^test_daemon: /x.json: missing field 'name'\n$");
  EXPECT_EXIT(
      {
        Parse({"--config=/x.json", "--log_format=json"});
        ExitStartupError("test_daemon", "/x.json: missing field \"name\"");
      },
      ::testing::ExitedWithCode(2),
      "^\\{\"time\":\"[-0-9T:.]+Z\",\"level\":\"ERROR\",\"party\":\"test_daemon\",.*"
      "\"message\":\"/x.json: missing field \\\\\"name\\\\\"\"\\}\n$");
}

// --log_format=json makes every line one JSON object that names the daemon.
TEST(DaemonMainTest, JsonFormatWritesJsonLines) {
  DaemonArgs args = Parse({"--config=/etc/x.json", "--log_format=json", "--v=2"});
  EXPECT_EQ(args.config, "/etc/x.json");
  EXPECT_EQ(LogLevel(), 2);
  testing::internal::CaptureStderr();
  GT_LOG(2, "quote \" and\nnewline");
  const std::string out = testing::internal::GetCapturedStderr();
  SetLogFormat(LogFormat::kText);
  SetLogLevel(1);
  ASSERT_EQ(out.find('\n'), out.size() - 1) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["party"], "test_daemon");
  EXPECT_EQ(j["level"], "DEBUG");
  EXPECT_EQ(j["message"], "quote \" and\nnewline");
}

TEST(DaemonMainTest, TextIsTheDefault) {
  Parse({"--config=/etc/x.json"});
  testing::internal::CaptureStderr();
  GT_LOG(1, "hello");
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find(" INFO test_daemon util/daemon_main_test.cc:"), std::string::npos) << out;
  EXPECT_NE(out.find(": hello\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace gputravel
