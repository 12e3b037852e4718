#include "util/log_format.h"

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gputravel {
namespace {

absl::Time At(int64_t unix_millis) { return absl::FromUnixMillis(unix_millis); }

LogRecord Record(absl::string_view message) {
  LogRecord r;
  r.time = At(1795728600123);  // 2026-11-26T21:30:00.123Z
  r.level = 1;
  r.party = "holder hospital-a";
  r.file = "holder_agent/holder_service.cc";
  r.line = 42;
  r.message = message;
  return r;
}

TEST(LogFormatTest, TimeIsIsoUtcWithMilliseconds) {
  EXPECT_EQ(FormatLogTime(At(1795728600123)), "2026-11-26T21:30:00.123Z");
  EXPECT_EQ(FormatLogTime(At(1795728600000)), "2026-11-26T21:30:00.000Z");
  EXPECT_EQ(FormatLogTime(At(5)), "1970-01-01T00:00:00.005Z");
  // Truncated, not rounded up into the next second.
  EXPECT_EQ(FormatLogTime(At(1795728600999) + absl::Microseconds(999)),
            "2026-11-26T21:30:00.999Z");
}

TEST(LogFormatTest, LevelNames) {
  EXPECT_EQ(LogLevelName(0), "ERROR");
  EXPECT_EQ(LogLevelName(1), "INFO");
  EXPECT_EQ(LogLevelName(2), "DEBUG");
  EXPECT_EQ(LogLevelName(3), "TRACE");
  EXPECT_EQ(LogLevelName(-1), "ERROR");
  EXPECT_EQ(LogLevelName(7), "TRACE");
}

TEST(LogFormatTest, TextLine) {
  EXPECT_EQ(FormatLogRecord(Record("provisioned 4 windows"), LogFormat::kText),
            "2026-11-26T21:30:00.123Z INFO holder hospital-a "
            "holder_agent/holder_service.cc:42: provisioned 4 windows\n");
  LogRecord r = Record("x");
  r.file = "";
  r.level = 3;
  EXPECT_EQ(FormatLogRecord(r, LogFormat::kText),
            "2026-11-26T21:30:00.123Z TRACE holder hospital-a: x\n");
}

// No message can start a line of its own in the text format.
TEST(LogFormatTest, TextEscapesControlCharacters) {
  const std::string line = FormatLogRecord(
      Record("a\nvfio_mux: FORGED\r\tb\x01\x7f \"q\" \\"), LogFormat::kText);
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
  EXPECT_NE(line.find(": a\\nvfio_mux: FORGED\\r\\tb\\x01\\x7f \"q\" \\\n"), std::string::npos)
      << line;
  LogRecord r = Record("m");
  r.party = "holder x\nforged";
  const std::string party_line = FormatLogRecord(r, LogFormat::kText);
  EXPECT_EQ(party_line.find('\n'), party_line.size() - 1) << party_line;
}

TEST(LogFormatTest, JsonLineParsesWithEveryField) {
  const std::string line = FormatLogRecord(Record("provisioned 4 windows"), LogFormat::kJson);
  ASSERT_EQ(line.find('\n'), line.size() - 1) << line;
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j.size(), 5u) << line;
  EXPECT_EQ(j["time"], "2026-11-26T21:30:00.123Z");
  EXPECT_EQ(j["level"], "INFO");
  EXPECT_EQ(j["party"], "holder hospital-a");
  EXPECT_EQ(j["source"], "holder_agent/holder_service.cc:42");
  EXPECT_EQ(j["message"], "provisioned 4 windows");
  // Fields in a fixed order, for people reading the raw lines.
  EXPECT_EQ(line.rfind("{\"time\":", 0), 0u) << line;
}

TEST(LogFormatTest, JsonEscapesQuotesNewlinesAndControlCharacters) {
  const std::string message = "say \"hi\"\nsecond line\\ \t\x01 end";
  const std::string line = FormatLogRecord(Record(message), LogFormat::kJson);
  // One line: the newline in the message is escaped.
  ASSERT_EQ(line.find('\n'), line.size() - 1) << line;
  EXPECT_NE(line.find("say \\\"hi\\\"\\nsecond line\\\\ \\t\\u0001 end"), std::string::npos)
      << line;
  EXPECT_EQ(nlohmann::json::parse(line)["message"], message);
}

TEST(LogFormatTest, JsonReplacesInvalidUtf8) {
  const std::string line = FormatLogRecord(Record("bad \xff\xfe byte, ok \xc3\xa9"),
                                           LogFormat::kJson);
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["message"], "bad \xef\xbf\xbd\xef\xbf\xbd byte, ok \xc3\xa9");
}

TEST(LogFormatTest, ParseLogFormat) {
  EXPECT_EQ(*ParseLogFormat("text"), LogFormat::kText);
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  for (const char* bad : {"", "JSON", "xml", "json "}) {
    absl::StatusOr<LogFormat> f = ParseLogFormat(bad);
    ASSERT_FALSE(f.ok()) << bad;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(f.status().message().find("'text' or 'json'"), std::string::npos)
        << f.status().message();
  }
}

}  // namespace
}  // namespace gputravel
