#include "cli/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "cli/terminal_text.h"

namespace gputravel {
namespace {

int TerminalWidth(int fd) {
  struct winsize ws {};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  // Switch unit before printf would round to "1024.0".
  while (v >= 1023.95 && unit < 5) {
    v /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[unit]);
  return buf;
}

std::string FormatRate(double bytes_per_second) {
  if (!(bytes_per_second >= 0) || std::isinf(bytes_per_second)) return "-";
  double r = std::floor(bytes_per_second + 0.5);
  if (r > 1.8e19) return "-";
  return FormatBytes(static_cast<uint64_t>(r)) + "/s";
}

namespace {
double Clamp(double fraction) {
  if (!(fraction > 0)) return 0;  // Also NaN.
  return fraction > 1 ? 1 : fraction;
}
}  // namespace

std::string FormatPercent(double fraction) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%.1f%%", Clamp(fraction) * 100.0);
  return buf;
}

std::string RenderProgressBar(double fraction, int width, const std::string& label,
                              double bytes_per_second) {
  if (width <= 0) return "";
  constexpr int kMinBar = 10;
  double f = Clamp(fraction);
  char pct[16];
  std::snprintf(pct, sizeof(pct), "%6s", FormatPercent(f).c_str());
  std::string tail = std::string(" ") + pct;
  if (bytes_per_second >= 0) tail += "  " + FormatRate(bytes_per_second);
  std::string lab = label;
  // Columns: label + " " + "[" + bar + "]" + tail.
  int fixed = 3 + static_cast<int>(tail.size());
  int bar = width - fixed - static_cast<int>(lab.size());
  if (bar < kMinBar) {
    bar = kMinBar;
    int room = width - fixed - kMinBar;  // Columns left for the label.
    if (room <= 0) {
      lab.clear();
    } else if (static_cast<int>(lab.size()) > room) {
      lab = lab.substr(0, room - 1) + "~";
    }
  }
  int filled = static_cast<int>(f * bar + 1e-9);
  if (filled > bar) filled = bar;
  std::string out;
  if (!lab.empty()) out = lab + " ";
  out += "[" + std::string(filled, '#') + std::string(bar - filled, '-') + "]" + tail;
  if (static_cast<int>(out.size()) > width) out.resize(width);
  return out;
}

ProgressDisplay::ProgressDisplay(FILE* out) : out_(out) {
  if (out_) width_ = std::min(TerminalWidth(fileno(out_)), 160) - 1;
}

void ProgressDisplay::SetCampaign(const std::string& name, uint64_t bytes_done,
                                  uint64_t bytes_total, uint64_t trips_ok,
                                  uint64_t trips_failed) {
  has_campaign_ = true;
  campaign_ = TerminalSafe(name);
  bytes_done_ = bytes_done;
  bytes_total_ = bytes_total;
  trips_ok_ = trips_ok;
  trips_failed_ = trips_failed;
}

void ProgressDisplay::TripStarted(uint64_t trip, const std::string& holder) {
  trip_ = trip;
  holder_ = TerminalSafe(holder);
  trip_bytes_ = trip_total_ = 0;
  trip_started_ = false;
  has_trip_ = true;
}

void ProgressDisplay::TripBytes(uint64_t trip, const std::string& holder, uint64_t bytes,
                                uint64_t total) {
  if (!has_trip_ || trip != trip_) TripStarted(trip, holder);
  if (!trip_started_) {
    trip_started_ = true;
    first_bytes_ = bytes;
    first_time_ = Clock::now();
  }
  trip_bytes_ = bytes;
  if (total > 0) trip_total_ = total;
}

void ProgressDisplay::Clear() {
  if (!out_ || lines_ == 0) return;
  std::fputs("\r\033[K", out_);
  for (int i = 1; i < lines_; ++i) std::fputs("\033[1A\033[K", out_);
  lines_ = 0;
  std::fflush(out_);
}

void ProgressDisplay::Draw(bool force) {
  if (!out_) return;
  auto now = Clock::now();
  if (!force && lines_ > 0 && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  std::vector<std::string> lines;
  if (has_trip_) {
    double f = trip_total_ > 0 ? static_cast<double>(trip_bytes_) / trip_total_ : 0;
    double rate = -1;
    double secs = std::chrono::duration<double>(now - first_time_).count();
    if (trip_started_ && secs > 0.05 && trip_bytes_ >= first_bytes_) {
      rate = (trip_bytes_ - first_bytes_) / secs;
    }
    std::string label =
        "trip " + std::to_string(trip_) + " " + holder_ + " " + FormatBytes(trip_bytes_);
    if (trip_total_ > 0) label += "/" + FormatBytes(trip_total_);
    lines.push_back(RenderProgressBar(f, width_, label, rate));
  }
  if (has_campaign_) {
    double f = bytes_total_ > 0 ? static_cast<double>(bytes_done_) / bytes_total_ : 0;
    std::string label = "campaign " + campaign_ + " " + FormatBytes(bytes_done_) + "/" +
                        (bytes_total_ > 0 ? FormatBytes(bytes_total_) : std::string("?")) +
                        " trips " + std::to_string(trips_ok_) + " ok " +
                        std::to_string(trips_failed_) + " failed";
    lines.push_back(RenderProgressBar(f, width_, label, -1));
  }
  Clear();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) std::fputs("\n", out_);
    std::fputs(lines[i].c_str(), out_);
  }
  lines_ = static_cast<int>(lines.size());
  std::fflush(out_);
}

}  // namespace gputravel
