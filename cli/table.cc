#include "cli/table.h"

#include <algorithm>
#include <utility>

namespace gputravel::cli {

void Table::Add(std::vector<std::string> row) {
  row.resize(headers_.size());
  rows_.push_back(std::move(row));
}

std::string Table::Render() const {
  std::vector<size_t> w(headers_.size());
  for (size_t i = 0; i < headers_.size(); ++i) w[i] = headers_[i].size();
  for (const auto& r : rows_) {
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& r) {
    std::string l;
    for (size_t i = 0; i < r.size(); ++i) {
      bool last = i + 1 == r.size();
      bool right = std::find(right_.begin(), right_.end(), static_cast<int>(i)) != right_.end();
      std::string pad(w[i] - r[i].size(), ' ');
      if (right) {
        l += pad + r[i];
      } else {
        l += r[i];
        if (!last) l += pad;
      }
      if (!last) l += "  ";
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line(headers_);
  for (const auto& r : rows_) line(r);
  return out;
}

}  // namespace gputravel::cli
