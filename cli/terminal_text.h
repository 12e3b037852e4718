#ifndef GPUTRAVEL_CLI_TERMINAL_TEXT_H_
#define GPUTRAVEL_CLI_TERMINAL_TEXT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace gputravel {

// Makes text from elsewhere (a server's error or event message, a holder's
// name) safe to print on a terminal: nothing in it can move the cursor,
// clear the screen, set the window title or start any other escape
// sequence. Each of these bytes is written as \xNN (lowercase hex):
//  - C0 controls (0x00-0x1f) except tab, and DEL (0x7f): ESC, CR, LF, BEL...;
//  - a byte that is not part of a well-formed UTF-8 sequence (a terminal in
//    a non-UTF-8 locale would read 0x9b alone as CSI);
//  - both bytes of a UTF-8 encoded C1 control (U+0080-U+009F, e.g. U+009B,
//    which some terminals also take as CSI).
// Everything else, printable UTF-8 included, is kept as it is. That is safe
// on a UTF-8 terminal. An 8-bit terminal in another locale that honours C1
// controls could still read a continuation byte of a well-formed character
// (0x9b in U+06DB, "\xdb\x9b") as CSI: run the CLI in a UTF-8 locale. Not
// for JSON output, which escapes control characters itself.
std::string TerminalSafe(absl::string_view text);

// `text` line by line, each line TerminalSafe and preceded by `indent`, each
// ending in a newline (a log's end shown to a person).
std::string TerminalSafeLines(absl::string_view text, absl::string_view indent);

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_TERMINAL_TEXT_H_
