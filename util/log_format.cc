#include "util/log_format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace gputravel {
namespace {

// `s` with every control character written as an escape: a text line stays
// one line whatever the message holds.
void AppendEscapedText(absl::string_view s, std::string* out) {
  for (unsigned char c : s) {
    switch (c) {
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(out, "\\x%02x", c);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
}

std::string Source(const LogRecord& r) {
  if (r.file.empty()) return "";
  return absl::StrCat(r.file, ":", r.line);
}

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  std::string shown;
  AppendEscapedText(name, &shown);
  return absl::InvalidArgumentError(
      absl::StrCat("--log_format must be 'text' or 'json', not '", shown, "'"));
}

absl::string_view LogLevelName(int level) {
  static constexpr absl::string_view kNames[] = {"ERROR", "INFO", "DEBUG", "TRACE"};
  return kNames[level < 0 ? 0 : level > 3 ? 3 : level];
}

std::string FormatLogTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

std::string FormatLogRecord(const LogRecord& r, LogFormat format) {
  if (format == LogFormat::kJson) {
    nlohmann::ordered_json j;
    j["time"] = FormatLogTime(r.time);
    j["level"] = std::string(LogLevelName(r.level));
    j["party"] = std::string(r.party);
    j["source"] = Source(r);
    j["message"] = std::string(r.message);
    // Never throws: bytes that are not UTF-8 become U+FFFD.
    return j.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace) +
           "\n";
  }
  std::string out = absl::StrCat(FormatLogTime(r.time), " ", LogLevelName(r.level), " ");
  AppendEscapedText(r.party, &out);
  const std::string source = Source(r);
  if (!source.empty()) absl::StrAppend(&out, " ", source);
  out.append(": ");
  AppendEscapedText(r.message, &out);
  out.push_back('\n');
  return out;
}

}  // namespace gputravel
