#ifndef GPUTRAVEL_CLI_PROGRESS_H_
#define GPUTRAVEL_CLI_PROGRESS_H_

#include <cstdint>
#include <string>

namespace gputravel {

// Human byte counts in binary units with one decimal: "512 B", "1.5 KiB",
// "256.0 MiB", "3.2 GiB", "1.0 TiB".
std::string FormatBytes(uint64_t bytes);

// A byte rate: FormatBytes(rate) + "/s" ("80.2 MiB/s"); "-" when the rate is
// negative, NaN or infinite.
std::string FormatRate(double bytes_per_second);

// "45.2%"; fraction is clamped to [0, 1] (NaN counts as 0).
std::string FormatPercent(double fraction);

// One line of a progress bar, never longer than `width` columns and without
// any control characters (the caller positions the cursor):
//
//   LABEL [##########----------]  50.0%  80.2 MiB/s
//
// `fraction` is clamped to [0, 1] (NaN counts as 0). The rate part is left
// out when bytes_per_second < 0. The bar gets the columns the label, the
// percentage and the rate leave, but at least 10; when even that does not fit
// the label is shortened (ending in "~"), and if `width` is too small for the
// bar at all only the beginning of the line is kept. width <= 0 gives "".
std::string RenderProgressBar(double fraction, int width, const std::string& label,
                              double bytes_per_second);

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_PROGRESS_H_
