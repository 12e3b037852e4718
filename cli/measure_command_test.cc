#include "cli/measure_command.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "keyxfer/runtime_measurement.h"
#include "nlohmann/json.hpp"
#include "util/files.h"
#include "util/hex.h"

namespace gputravel {
namespace {

using ::testing::HasSubstr;

// What the command prints is what the daemon computes at start-up for the
// same binary and configuration file.
TEST(MeasureCommandTest, PrintsWhatTheDaemonMeasures) {
  const std::string dir = ::testing::TempDir();
  ASSERT_TRUE(WriteFile(dir + "/bin", "holder code").ok());
  ASSERT_TRUE(WriteFile(dir + "/ca.pem", "campaign CA").ok());
  const nlohmann::json config = {{"name", "hospital-a"},
                                 {"listen", "0.0.0.0:7001"},
                                 {"tls", {{"ca", dir + "/ca.pem"}}}};
  ASSERT_TRUE(WriteFile(dir + "/holder.json", config.dump(2)).ok());
  auto report = MeasureReport("holder_agent", dir + "/holder.json", dir + "/bin");
  ASSERT_TRUE(report.ok()) << report.status();
  auto j = nlohmann::json::parse(*report);
  auto m = MeasureDaemon("holder_agent", dir + "/bin", config, "x");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(j["rtmr3"], HexEncode(m->rtmr3));
  EXPECT_EQ(j["events"]["config"], HexEncode(m->events[kRtmr3ConfigEvent]));
  EXPECT_EQ(j["peer_rtmr3"]["binary"], HexEncode(m->events[kRtmr3BinaryEvent]));
  EXPECT_FALSE(j["peer_rtmr3"].contains("peer_pins"));  // a holder's pins are its own
  EXPECT_TRUE(j["trusted_files"].contains("/tls/ca"));
  auto orch = nlohmann::json::parse(*MeasureReport("orchestrator", dir + "/holder.json", dir + "/bin"));
  EXPECT_TRUE(orch["peer_rtmr3"].contains("peer_pins"));
}

TEST(MeasureCommandTest, ErrorsNameTheFile) {
  auto r = MeasureReport("holder_agent", ::testing::TempDir() + "/none.json", "/bin/true");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("none.json"));
  EXPECT_FALSE(MeasureReport("mux", "x", "y").ok());
}

}  // namespace
}  // namespace gputravel
