#include "metrics/metrics_scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "absl/strings/numbers.h"
#include "metrics/metrics_exposer.h"

namespace gputravel {
namespace {

// Closes the socket on every way out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

absl::StatusOr<std::string> ScrapeMetrics(const std::string& address) {
  absl::Status valid = CheckMetricsListen(address, "metrics address");
  if (!valid.ok()) return valid;
  uint32_t port = 0;
  if (!absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port) || port == 0) {
    return absl::InvalidArgumentError("metrics address " + address + ": no port to connect to");
  }
  Fd s{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (s.fd < 0) return absl::InternalError(std::string("socket: ") + std::strerror(errno));
  timeval tv{10, 0};
  ::setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(s.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s.fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return absl::UnavailableError("metrics at " + address + ": connect: " +
                                  std::strerror(errno));
  }
  const std::string request = std::string("GET ") + kMetricsPath +
                              " HTTP/1.0\r\nHost: " + address + "\r\n\r\n";
  for (size_t sent = 0; sent < request.size();) {
    ssize_t n = ::send(s.fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      return absl::UnavailableError("metrics at " + address + ": send: " +
                                    std::strerror(errno));
    }
    sent += static_cast<size_t>(n);
  }
  // HTTP/1.0: the answer ends when the server closes the connection.
  std::string answer;
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(s.fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      return absl::UnavailableError("metrics at " + address + ": recv: " +
                                    std::strerror(errno));
    }
    answer.append(buf, static_cast<size_t>(n));
  }
  const size_t end_of_head = answer.find("\r\n\r\n");
  const std::string status_line = answer.substr(0, answer.find("\r\n"));
  if (end_of_head == std::string::npos || status_line.find(" 200 ") == std::string::npos) {
    return absl::UnavailableError("metrics at " + address + ": answered '" + status_line +
                                  "', not 200 with a body");
  }
  return answer.substr(end_of_head + 4);
}

absl::StatusOr<std::map<std::string, double>> ParseMetricsText(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    // The value follows the last space (label values may hold spaces).
    const size_t space = line.rfind(' ');
    double value = 0;
    const std::string v = space == std::string::npos ? "" : line.substr(space + 1);
    bool parsed = absl::SimpleAtod(v, &value);
    if (!parsed && (v == "+Inf" || v == "-Inf" || v == "NaN")) {
      value = std::strtod(v.c_str(), nullptr);
      parsed = true;
    }
    if (space == 0 || !parsed) {
      return absl::InvalidArgumentError("metrics text line " + std::to_string(number) +
                                        ": not 'SERIES VALUE': " + line);
    }
    out[line.substr(0, space)] = value;
  }
  return out;
}

}  // namespace gputravel
