#ifndef GPUTRAVEL_CLI_TABLE_H_
#define GPUTRAVEL_CLI_TABLE_H_

#include <string>
#include <utility>
#include <vector>

namespace gputravel::cli {

// Left-aligned text table with two spaces between columns; columns whose
// index is in `right` are right-aligned. The last column is not padded.
class Table {
 public:
  Table(std::vector<std::string> headers, std::vector<int> right = {})
      : headers_(std::move(headers)), right_(std::move(right)) {}
  // A row; missing cells are empty, extra ones dropped.
  void Add(std::vector<std::string> row);
  // The header line and every row, each ending in a newline; trailing spaces
  // are trimmed.
  std::string Render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<int> right_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace gputravel::cli

#endif  // GPUTRAVEL_CLI_TABLE_H_
