#include "cli/terminal_text.h"

#include <string>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(TerminalSafeTest, KeepsPrintableAsciiAndTab) {
  EXPECT_EQ(TerminalSafe(""), "");
  EXPECT_EQ(TerminalSafe("holder-a: trip 3 failed (50%)\t[ok] ~"),
            "holder-a: trip 3 failed (50%)\t[ok] ~");
  EXPECT_EQ(TerminalSafe("back\\slash"), "back\\slash");
}

TEST(TerminalSafeTest, EscapesC0ControlsAndDel) {
  // Clear the screen, set the window title, ring the bell.
  EXPECT_EQ(TerminalSafe("\x1b[2J\x1b]0;pwned\x07"), "\\x1b[2J\\x1b]0;pwned\\x07");
  EXPECT_EQ(TerminalSafe("a\r\nb"), "a\\x0d\\x0ab");
  EXPECT_EQ(TerminalSafe(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(TerminalSafe("\x1f"), "\\x1f");
  EXPECT_EQ(TerminalSafe("\x7f"), "\\x7f");
  EXPECT_EQ(TerminalSafe("\b\b\bok"), "\\x08\\x08\\x08ok");
}

TEST(TerminalSafeTest, KeepsValidUtf8) {
  // 2-, 3- and 4-byte sequences, and U+00A0 (the first code point after C1).
  const std::string s =
      "h\xc3\xb4pital \xe2\x82\xac \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80 \xc2\xa0|";
  EXPECT_EQ(TerminalSafe(s), s);
}

TEST(TerminalSafeTest, EscapesC1ControlsAndMalformedUtf8) {
  // U+009B (CSI) encoded in UTF-8, and U+0080.
  EXPECT_EQ(TerminalSafe("a\xc2\x9b" "31mred"), "a\\xc2\\x9b31mred");
  EXPECT_EQ(TerminalSafe("\xc2\x80"), "\\xc2\\x80");
  // A lone C1 byte (CSI for a terminal in an 8-bit locale).
  EXPECT_EQ(TerminalSafe("\x9b" "31m"), "\\x9b31m");
  // Latin-1 text is not UTF-8.
  EXPECT_EQ(TerminalSafe("caf\xe9!"), "caf\\xe9!");
  // Overlong '/', a surrogate, a code point above U+10FFFF.
  EXPECT_EQ(TerminalSafe("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(TerminalSafe("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(TerminalSafe("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
  // Truncated sequences, at the end and before ASCII.
  EXPECT_EQ(TerminalSafe("\xe2\x82"), "\\xe2\\x82");
  EXPECT_EQ(TerminalSafe("\xe2\x82" "a"), "\\xe2\\x82a");
  EXPECT_EQ(TerminalSafe("\xf0\x9f\x9a"), "\\xf0\\x9f\\x9a");
}

TEST(TerminalSafeLinesTest, EachLineEscapedAndIndented) {
  EXPECT_EQ(TerminalSafeLines("a\nb\x1b[2J\n\nc", "  "), "  a\n  b\\x1b[2J\n  \n  c\n");
  EXPECT_EQ(TerminalSafeLines("", "  "), "");
}

}  // namespace
}  // namespace gputravel
