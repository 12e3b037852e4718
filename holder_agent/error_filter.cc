#include "holder_agent/error_filter.h"

#include "absl/strings/str_replace.h"

namespace gputravel {
namespace {

constexpr char kHidden[] = "<holder path>";

bool StartsPath(const std::string& m, size_t i) {
  if (m[i] != '/') return false;
  if (i == 0) return true;
  const char before = m[i - 1];
  return before == ' ' || before == '\'' || before == '"' || before == '(' || before == '=' ||
         before == ':' || before == '\t' || before == '\n';
}

// Ends a path: what a message puts after one (", ': )").
bool EndsPath(char c) {
  return c == ' ' || c == '\'' || c == '"' || c == ')' || c == ',' || c == ';' || c == ':' ||
         c == '\t' || c == '\n';
}

}  // namespace

absl::Status ForOrchestrator(const absl::Status& s, const std::string& dataset_path,
                             const std::string& dataset_name) {
  if (s.ok()) return s;
  std::string m(s.message());
  if (!dataset_path.empty()) {
    m = absl::StrReplaceAll(m, {{"dataset " + dataset_path, "dataset '" + dataset_name + "'"}});
  }
  std::string out;
  out.reserve(m.size());
  for (size_t i = 0; i < m.size();) {
    if (!StartsPath(m, i)) {
      out.push_back(m[i++]);
      continue;
    }
    size_t end = i;
    while (end < m.size() && !EndsPath(m[end])) ++end;
    // A trailing full stop ends the sentence, not the path.
    while (end > i + 1 && m[end - 1] == '.') --end;
    out += kHidden;
    i = end;
  }
  return absl::Status(s.code(), out);
}

}  // namespace gputravel
