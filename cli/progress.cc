#include "cli/progress.h"

#include <cmath>
#include <cstdio>

namespace gputravel {

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

}  // namespace gputravel
