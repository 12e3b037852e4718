#ifndef GPUTRAVEL_CLI_PROGRESS_H_
#define GPUTRAVEL_CLI_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
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

// Progress bars redrawn in place (carriage return and ANSI erase-line) on a
// terminal: the provisioning of the current trip (bytes, rate) and the
// campaign's bytes and trips. Names are made terminal-safe. Not thread-safe.
class ProgressDisplay {
 public:
  // out == nullptr: disabled (every call does nothing).
  explicit ProgressDisplay(FILE* out);
  bool enabled() const { return out_ != nullptr; }

  void SetCampaign(const std::string& name, uint64_t bytes_done, uint64_t bytes_total,
                   uint64_t trips_ok, uint64_t trips_failed);
  void TripStarted(uint64_t trip, const std::string& holder);
  // Bytes of the trip so far (of `total`, 0 when not known).
  void TripBytes(uint64_t trip, const std::string& holder, uint64_t bytes, uint64_t total);
  void TripFinished() { has_trip_ = false; }

  // Erases the bars; the cursor is left at the start of the first bar line.
  void Clear();
  // Redraws the bars (at most every 100 ms unless forced).
  void Draw(bool force);

 private:
  using Clock = std::chrono::steady_clock;

  FILE* out_;
  int width_ = 79;
  int lines_ = 0;
  Clock::time_point last_draw_{};
  bool has_campaign_ = false;
  std::string campaign_;
  uint64_t bytes_done_ = 0, bytes_total_ = 0, trips_ok_ = 0, trips_failed_ = 0;
  bool has_trip_ = false, trip_started_ = false;
  uint64_t trip_ = 0, trip_bytes_ = 0, trip_total_ = 0, first_bytes_ = 0;
  std::string holder_;
  Clock::time_point first_time_{};
};

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_PROGRESS_H_
