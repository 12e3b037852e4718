#include "cli/terminal_text.h"

#include <cstddef>

#include "util/hex.h"

namespace gputravel {
namespace {

void AppendEscaped(std::string* out, unsigned char c) {
  const char byte = static_cast<char>(c);
  out->append("\\x").append(HexEncode(absl::string_view(&byte, 1)));
}

bool IsContinuation(unsigned char c) { return (c & 0xc0) == 0x80; }

// Length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF) starting at text[i], which is >= 0x80;
// 0 if there is none.
size_t Utf8SequenceLength(absl::string_view text, size_t i) {
  const unsigned char c = static_cast<unsigned char>(text[i]);
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // Range of the second byte.
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    if (c == 0xe0) lo = 0xa0;  // Overlong below U+0800.
    if (c == 0xed) hi = 0x9f;  // Surrogates U+D800-U+DFFF.
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    if (c == 0xf0) lo = 0x90;  // Overlong below U+10000.
    if (c == 0xf4) hi = 0x8f;  // Above U+10FFFF.
  } else {
    return 0;  // A continuation byte, 0xc0, 0xc1 or 0xf5-0xff.
  }
  if (text.size() - i < len) return 0;
  const unsigned char second = static_cast<unsigned char>(text[i + 1]);
  if (second < lo || second > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if (!IsContinuation(static_cast<unsigned char>(text[i + k]))) return 0;
  }
  return len;
}

}  // namespace

std::string TerminalSafe(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t') || c == 0x7f) {
        AppendEscaped(&out, c);
      } else {
        out.push_back(static_cast<char>(c));
      }
      ++i;
      continue;
    }
    const size_t len = Utf8SequenceLength(text, i);
    if (len == 0) {
      AppendEscaped(&out, c);
      ++i;
      continue;
    }
    if (len == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) {
      // U+0080-U+009F: a C1 control.
      AppendEscaped(&out, c);
      AppendEscaped(&out, static_cast<unsigned char>(text[i + 1]));
    } else {
      out.append(text.data() + i, len);
    }
    i += len;
  }
  return out;
}

std::string TerminalSafeLines(absl::string_view text, absl::string_view indent) {
  std::string out;
  size_t from = 0;
  while (from < text.size()) {
    size_t nl = text.find('\n', from);
    if (nl == absl::string_view::npos) nl = text.size();
    out += std::string(indent) + TerminalSafe(text.substr(from, nl - from)) + "\n";
    from = nl + 1;
  }
  return out;
}

}  // namespace gputravel
