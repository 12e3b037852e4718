#include "util/json_text.h"

#include <set>
#include <utility>
#include <vector>

namespace gputravel {
namespace {

using nlohmann::json;

std::string Sub(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

// Walks the text once, before it is parsed into a value, keeping the path of
// the value being read and the keys each open object has seen.
class DuplicateKeyChecker : public nlohmann::json_sax<json> {
 public:
  explicit DuplicateKeyChecker(std::string prefix) : prefix_(std::move(prefix)) {}
  const absl::Status& status() const { return status_; }

  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override {
    frames_.push_back(Frame{false, 0, "", {}, Begin()});
    return true;
  }
  bool key(string_t& k) override {
    Frame& f = frames_.back();
    if (!f.keys.insert(k).second) {
      status_ = absl::InvalidArgumentError(prefix_ + Sub(f.path, k) +
                                           ": appears twice in the same object");
      return false;
    }
    f.key = k;
    return true;
  }
  bool end_object() override {
    frames_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    frames_.push_back(Frame{true, 0, "", {}, Begin()});
    return true;
  }
  bool end_array() override {
    frames_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    // ex.what() is "[json.exception.parse_error.101] parse error at line L,
    // column C: ..."; keep the human part.
    std::string what = ex.what();
    size_t close = what.find("] ");
    if (close != std::string::npos) what = what.substr(close + 2);
    status_ = absl::InvalidArgumentError(prefix_ + "invalid JSON at byte " +
                                         std::to_string(position) + ": " + what);
    return false;
  }

 private:
  struct Frame {
    bool is_array;
    size_t index;     // next element index (arrays)
    std::string key;  // current key (objects)
    std::set<std::string> keys;
    std::string path;
  };

  // The path of the value that starts now; advances the enclosing array.
  std::string Begin() {
    if (frames_.empty()) return "";
    Frame& f = frames_.back();
    if (f.is_array) return Index(f.path, f.index++);
    return Sub(f.path, f.key);
  }
  bool Value() {
    Begin();
    return true;
  }

  std::string prefix_;
  std::vector<Frame> frames_;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<json> ParseJsonText(const std::string& text, const std::string& where) {
  const std::string prefix = where.empty() ? "" : where + ": ";
  DuplicateKeyChecker checker(prefix);
  if (!json::sax_parse(text, &checker)) {
    if (!checker.status().ok()) return checker.status();
    return absl::InvalidArgumentError(prefix + "invalid JSON");
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(prefix + "invalid JSON");
  return j;
}

}  // namespace gputravel
