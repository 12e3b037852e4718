#include "cli/client_commands.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "auth/identity.h"
#include "auth/tls_config.h"
#include "cli/progress.h"
#include "cli/terminal_text.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/support/log.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "proto/orchestrator.grpc.pb.h"
#include "util/files.h"
#include "util/flags.h"

namespace gputravel {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kEnvEndpoint[] = "GPUTRAVEL_ENDPOINT";
constexpr char kEnvCa[] = "GPUTRAVEL_CA";
constexpr char kEnvCert[] = "GPUTRAVEL_CERT";
constexpr char kEnvKey[] = "GPUTRAVEL_KEY";

const char kExitCodesHelp[] =
    "\nExit codes:\n"
    "  0  success (watch: the campaign COMPLETED)\n"
    "  1  the campaign FAILED, or the call failed on the orchestrator\n"
    "     (INTERNAL, UNKNOWN, ABORTED, ...)\n"
    "  2  usage error: bad flags or arguments, missing endpoint or TLS files,\n"
    "     unreadable or invalid JSON specification\n"
    "  3  NOT_FOUND (no such campaign)\n"
    "  4  rejected by the orchestrator: FAILED_PRECONDITION, ALREADY_EXISTS or\n"
    "     INVALID_ARGUMENT (its message names the state or field)\n"
    "  5  cannot reach the orchestrator: UNAVAILABLE or DEADLINE_EXCEEDED\n"
    "  6  UNAUTHENTICATED or PERMISSION_DENIED (certificate or role refused)\n"
    "  7  watch ended with the campaign CANCELLED\n"
    "\nEnvironment: GPUTRAVEL_ENDPOINT, GPUTRAVEL_CA, GPUTRAVEL_CERT and\n"
    "GPUTRAVEL_KEY give the defaults of --endpoint, --ca, --cert and --key.\n";

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string U64(uint64_t v) { return std::to_string(v); }

// "2025-01-31T12:00:00Z" (with_ms: "2025-01-31T12:00:00.123Z"), UTC; "-" for 0.
std::string FormatTime(int64_t unix_ms, bool with_ms) {
  if (unix_ms <= 0) return "-";
  std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out = buf;
  if (with_ms) {
    char ms[8];
    std::snprintf(ms, sizeof(ms), ".%03d", static_cast<int>(unix_ms % 1000));
    out += ms;
  }
  return out + "Z";
}

std::string FormatLoss(double loss) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4f", loss);
  return buf;
}

std::string StateName(v1::CampaignState s) {
  const std::string& n = v1::CampaignState_Name(s);
  return n.empty() ? std::to_string(static_cast<int>(s)) : n;
}

bool IsFinal(v1::CampaignState s) {
  return s == v1::COMPLETED || s == v1::FAILED || s == v1::CANCELLED;
}

std::string CodeName(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "code " + std::to_string(static_cast<int>(c));
  }
}

int ExitCodeFor(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::OK: return kExitOk;
    case grpc::StatusCode::NOT_FOUND: return kExitNotFound;
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::INVALID_ARGUMENT: return kExitRejected;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED: return kExitUnreachable;
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED: return kExitDenied;
    default: return kExitFailed;
  }
}

// Protobuf's JSON form with the proto field names and every primitive field,
// on one line.
std::string ToJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  o.preserve_proto_field_names = true;
  o.add_whitespace = false;
  std::string out;
  auto st = google::protobuf::util::MessageToJsonString(m, &out, o);
  if (!st.ok()) return "{}";
  return out;
}

// A random version-4 UUID as the default idempotency token.
std::string RandomRequestId() {
  unsigned char b[16];
  bool ok = false;
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ok = ::read(fd, b, sizeof(b)) == static_cast<ssize_t>(sizeof(b));
    ::close(fd);
  }
  if (!ok) {
    std::random_device rd;
    for (auto& c : b) c = static_cast<unsigned char>(rd());
  }
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[b[i] >> 4];
    out += kHex[b[i] & 15];
  }
  return out;
}

// Left-aligned text table with two spaces between columns; columns whose
// index is in `right` are right-aligned. The last column is not padded.
class Table {
 public:
  Table(std::vector<std::string> headers, std::vector<int> right = {})
      : headers_(std::move(headers)), right_(std::move(right)) {}
  void Add(std::vector<std::string> row) {
    row.resize(headers_.size());
    rows_.push_back(std::move(row));
  }
  std::string Render() const {
    std::vector<size_t> w(headers_.size());
    for (size_t i = 0; i < headers_.size(); ++i) w[i] = headers_[i].size();
    for (const auto& r : rows_) {
      for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
    }
    std::string out;
    auto line = [&](const std::vector<std::string>& r) {
      std::string l;
      for (size_t i = 0; i < r.size(); ++i) {
        bool last = i + 1 == r.size();
        bool right = std::find(right_.begin(), right_.end(), static_cast<int>(i)) !=
                     right_.end();
        std::string pad(w[i] - r[i].size(), ' ');
        if (right) {
          l += pad + r[i];
        } else {
          l += r[i];
          if (!last) l += pad;
        }
        if (!last) l += "  ";
      }
      while (!l.empty() && l.back() == ' ') l.pop_back();
      out += l + "\n";
    };
    line(headers_);
    for (const auto& r : rows_) line(r);
    return out;
  }

 private:
  std::vector<std::string> headers_;
  std::vector<int> right_;
  std::vector<std::vector<std::string>> rows_;
};

std::string Progress(const v1::Campaign& c) {
  if (c.bytes_total() == 0) return "-";
  return FormatPercent(static_cast<double>(c.bytes_provisioned()) /
                       static_cast<double>(c.bytes_total()));
}

std::string CampaignSummary(const v1::Campaign& c) {
  std::string out;
  auto row = [&](const char* k, const std::string& v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%-13s", k);
    out += buf + v + "\n";
  };
  row("Campaign", TerminalSafe(c.name()));
  row("State", StateName(c.state()));
  row("GPU", c.gpu().empty() ? "-" : TerminalSafe(c.gpu()));
  row("Trips", U64(c.trips_ok()) + " ok, " + U64(c.trips_failed()) + " failed");
  if (c.bytes_total() > 0) {
    row("Provisioned", FormatBytes(c.bytes_provisioned()) + " of " +
                           FormatBytes(c.bytes_total()) + " (" + Progress(c) + ")");
  } else {
    row("Provisioned", FormatBytes(c.bytes_provisioned()) + " (total not known yet)");
  }
  row("Last loss", c.has_loss() ? FormatLoss(c.last_loss()) : "-");
  if (c.has_eval_loss()) row("Held-out", FormatLoss(c.last_eval_loss()));
  row("Created", FormatTime(c.created_unix_ms(), false));
  row("Updated", FormatTime(c.updated_unix_ms(), false));
  if (!c.error().empty()) row("Error", TerminalSafe(c.error()));
  return out;
}

std::string HolderCursor(const v1::HolderStatus& h) {
  std::string s = FormatBytes(h.cursor_offset());
  if (h.dataset_bytes() > 0) s += " of " + FormatBytes(h.dataset_bytes());
  return s;
}

std::string HoldersTable(const google::protobuf::RepeatedPtrField<v1::HolderStatus>& hs,
                         bool with_campaign) {
  std::vector<std::string> head;
  if (with_campaign) head.push_back("CAMPAIGN");
  for (const char* h : {"HOLDER", "STATE", "ROUND", "CURSOR", "TRIPS", "BYTES"}) head.push_back(h);
  if (with_campaign) head.push_back("ENDPOINT");
  head.push_back("ERROR");
  int off = with_campaign ? 1 : 0;
  Table t(head, {off + 2, off + 4});
  for (const auto& h : hs) {
    std::vector<std::string> r;
    if (with_campaign) r.push_back(TerminalSafe(h.campaign()));
    r.push_back(TerminalSafe(h.name()));
    r.push_back(h.state().empty() ? "-" : TerminalSafe(h.state()));
    r.push_back(std::to_string(h.round()));
    r.push_back(HolderCursor(h));
    r.push_back(U64(h.trips()));
    r.push_back(FormatBytes(h.bytes()));
    if (with_campaign) r.push_back(h.endpoint().empty() ? "-" : TerminalSafe(h.endpoint()));
    r.push_back(TerminalSafe(h.error()));
    t.Add(std::move(r));
  }
  return t.Render();
}

std::string Flag(bool v, bool running) {
  if (v) return "yes";
  return running ? "-" : "NO";
}

std::string TripsTable(const v1::Campaign& c) {
  Table t({"ID", "HOLDER", "ROUND", "WINDOW", "STEP", "OUTCOME", "BYTES", "MB/S", "LOSS",
           "DIGEST", "SCRUB", "REKEY", "ERROR"},
          {0, 2, 7, 8});
  for (const auto& tr : c.trips()) {
    bool running = tr.outcome().empty();
    char mbs[32] = "-";
    if (tr.provision_seconds() > 0 && tr.bytes() > 0) {
      std::snprintf(mbs, sizeof(mbs), "%.1f", tr.bytes() / 1e6 / tr.provision_seconds());
    }
    std::string window = FormatBytes(tr.window_offset()) + " +" + FormatBytes(tr.window_length());
    t.Add({U64(tr.id()), TerminalSafe(tr.holder()), std::to_string(tr.round()), window,
           v1::TripStep_Name(tr.step()), running ? "running" : TerminalSafe(tr.outcome()),
           FormatBytes(tr.bytes()), mbs, tr.has_loss() ? FormatLoss(tr.loss()) : "-",
           Flag(tr.digest_match(), running), Flag(tr.scrub_verified(), running),
           Flag(tr.rekeyed(), running), TerminalSafe(tr.error())});
  }
  return t.Render();
}

std::string EventLine(const v1::Event& e) {
  auto pad = [](std::string s, size_t n) {
    if (s.size() < n) s += std::string(n - s.size(), ' ');
    return s + "  ";
  };
  std::string l = FormatTime(e.time_unix_ms(), true) + "  ";
  l += pad(e.trip() ? "trip " + U64(e.trip()) : "-", 7);
  l += pad(e.holder().empty() ? "-" : TerminalSafe(e.holder()), 12);
  l += pad(v1::EventKind_Name(e.kind()), 14);
  l += pad(e.step() == v1::TRIP_STEP_UNSPECIFIED ? "-" : v1::TripStep_Name(e.step()), 10);
  std::string msg = TerminalSafe(e.message());
  if (e.kind() == v1::CAMPAIGN_STATE) {
    std::string st = "state " + StateName(e.campaign_state());
    msg = msg.empty() ? st : st + ": " + msg;
  }
  if ((e.kind() == v1::PROVISIONED || e.kind() == v1::PROGRESS) && e.bytes() > 0) {
    std::string b = FormatBytes(e.bytes());
    if (e.total_bytes() > 0) b += " of " + FormatBytes(e.total_bytes());
    msg = msg.empty() ? b : msg + " (" + b + ")";
  }
  if (e.kind() == v1::TRAINED && e.has_loss()) {
    msg += (msg.empty() ? "" : " ") + std::string("loss=") + FormatLoss(e.loss());
    if (e.has_eval_loss()) msg += " held-out=" + FormatLoss(e.eval_loss());
  }
  l += msg.empty() ? "-" : msg;
  while (!l.empty() && l.back() == ' ') l.pop_back();
  return l;
}

int TerminalWidth(int fd) {
  struct winsize ws {};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

// Progress bars redrawn in place (carriage return and ANSI erase-line) on a
// terminal: the provisioning of the current trip and the campaign's bytes.
class ProgressDisplay {
 public:
  // out == nullptr: disabled.
  explicit ProgressDisplay(FILE* out) : out_(out) {
    if (out_) width_ = std::min(TerminalWidth(fileno(out_)), 160) - 1;
  }
  bool enabled() const { return out_ != nullptr; }

  void SetCampaign(const v1::Campaign& c) {
    has_campaign_ = true;
    campaign_ = TerminalSafe(c.name());
    bytes_done_ = c.bytes_provisioned();
    bytes_total_ = c.bytes_total();
    trips_ok_ = c.trips_ok();
    trips_failed_ = c.trips_failed();
  }
  void TripStarted(uint64_t trip, const std::string& holder) {
    trip_ = trip;
    holder_ = TerminalSafe(holder);
    trip_bytes_ = trip_total_ = 0;
    trip_started_ = false;
    has_trip_ = true;
  }
  void TripBytes(uint64_t trip, const std::string& holder, uint64_t bytes, uint64_t total) {
    if (!has_trip_ || trip != trip_) TripStarted(trip, holder);
    if (!trip_started_) {
      trip_started_ = true;
      first_bytes_ = bytes;
      first_time_ = Clock::now();
    }
    trip_bytes_ = bytes;
    if (total > 0) trip_total_ = total;
  }
  void TripFinished() { has_trip_ = false; }

  // Erases the bars; the cursor is left at the start of the first bar line.
  void Clear() {
    if (!out_ || lines_ == 0) return;
    std::fputs("\r\033[K", out_);
    for (int i = 1; i < lines_; ++i) std::fputs("\033[1A\033[K", out_);
    lines_ = 0;
    std::fflush(out_);
  }

  // Redraws the bars (at most every 100 ms unless forced).
  void Draw(bool force) {
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
      std::string label = "trip " + U64(trip_) + " " + holder_ + " " + FormatBytes(trip_bytes_);
      if (trip_total_ > 0) label += "/" + FormatBytes(trip_total_);
      lines.push_back(RenderProgressBar(f, width_, label, rate));
    }
    if (has_campaign_) {
      double f = bytes_total_ > 0 ? static_cast<double>(bytes_done_) / bytes_total_ : 0;
      std::string label = "campaign " + campaign_ + " " + FormatBytes(bytes_done_) + "/" +
                          (bytes_total_ > 0 ? FormatBytes(bytes_total_) : std::string("?")) +
                          " trips " + U64(trips_ok_) + " ok " + U64(trips_failed_) + " failed";
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

 private:
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

// ---------------------------------------------------------------------------

struct CommandInfo;

// One command invocation: parsed flags, connection, output helpers.
class Ctx {
 public:
  Ctx(const CommandInfo& info, Flags& flags) : info_(info), flags_(flags) {}

  const std::string& cmd() const;
  Flags& flags() { return flags_; }
  bool json() const { return flags_.IsSet("json"); }
  const std::string& endpoint() const { return endpoint_; }

  // Messages carry text from the server and from files: escaped for the
  // terminal as a whole (TerminalSafe leaves already escaped text as it is).
  int Fail(int code, const std::string& msg) {
    std::fflush(stdout);
    std::fprintf(stderr, "gputravel %s: %s\n", cmd().c_str(), TerminalSafe(msg).c_str());
    return code;
  }

  // Maps a failed call to its exit code and a message that says what to do.
  int RpcError(const grpc::Status& s, const std::string& what,
               const std::string& hint = "") {
    // The message comes from the server (or the network): never raw to a terminal.
    std::string detail = CodeName(s.error_code()) + ": " + TerminalSafe(s.error_message());
    std::string msg;
    switch (ExitCodeFor(s.error_code())) {
      case kExitUnreachable:
        msg = s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                  ? "the orchestrator at " + endpoint_ + " did not answer " + what +
                        " within " + flags_.Get("timeout") + " s (" + detail + ")"
                  : "cannot reach the orchestrator at " + endpoint_ + ": " + what + ": " +
                        detail + " (is it running, and are --endpoint and --server_name right?)";
        break;
      case kExitDenied:
        msg = "the orchestrator at " + endpoint_ + " refused " + what + " (" + detail +
              "); it accepts operator and scheduler certificates of its campaign CA "
              "(--cert/--key, GPUTRAVEL_CERT/GPUTRAVEL_KEY), and a holder's for `holders` "
              "only";
        break;
      default:
        msg = what + ": " + detail;
    }
    if (!hint.empty()) msg += "; " + hint;
    return Fail(ExitCodeFor(s.error_code()), msg);
  }

  // Checks the common flags and builds the mTLS channel; 0 or an exit code.
  int Connect() {
    endpoint_ = flags_.Get("endpoint");
    struct Need {
      const char* flag;
      const char* env;
    };
    for (Need n : {Need{"endpoint", kEnvEndpoint}, Need{"ca", kEnvCa}, Need{"cert", kEnvCert},
                   Need{"key", kEnvKey}}) {
      if (flags_.Get(n.flag).empty()) {
        return Fail(kExitUsage, std::string("missing --") + n.flag + " (or set " + n.env +
                                    "); see --help");
      }
    }
    TlsFiles files{flags_.Get("ca"), flags_.Get("cert"), flags_.Get("key")};
    // Only whether each file can be read, so the error names its flag: the
    // contents (the private key among them) are read once, by
    // MakeSecureChannel, which wipes its copy of the key.
    for (auto [flag, path] : {std::pair<const char*, std::string>{"ca", files.ca},
                              {"cert", files.cert},
                              {"key", files.key}}) {
      if (::access(path.c_str(), R_OK) != 0) {
        return Fail(kExitUsage, std::string("--") + flag + ": cannot read " + path + ": " +
                                    std::strerror(errno));
      }
    }
    Identity server{kRoleOrchestrator, flags_.Get("server_name")};
    absl::Status st = ValidateIdentity(server);
    if (!st.ok()) return Fail(kExitUsage, "--server_name: " + std::string(st.message()));
    // Also checks that the key is the certificate's, that it chains to the CA
    // and is valid now: a problem with the local files is a usage error.
    // Keepalive: `watch` and `cancel --wait` hold a stream open for hours;
    // a host that vanishes fails it (exit 5) instead of hanging forever.
    SecureChannelOptions options;
    options.keepalive = true;
    auto ch = MakeSecureChannel(endpoint_, files, server, options);
    if (!ch.ok()) return Fail(kExitUsage, std::string(ch.status().message()));
    stub_ = v1::Orchestrator::NewStub(*ch);
    return kExitOk;
  }

  v1::Orchestrator::Stub& stub() { return *stub_; }

  // A context with the --timeout deadline.
  std::unique_ptr<grpc::ClientContext> Call() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + timeout_);
    return ctx;
  }

  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

  void PrintJson(const std::string& doc) {
    std::fputs(doc.c_str(), stdout);
    std::fputs("\n", stdout);
    std::fflush(stdout);
  }

 private:
  const CommandInfo& info_;
  Flags& flags_;
  std::string endpoint_;
  std::chrono::milliseconds timeout_{30000};
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
};

struct CommandInfo {
  std::string name;
  std::string args;     // Positional arguments for the usage line.
  int min_args, max_args;
  std::string summary;  // One line for `gputravel --help`.
  std::string description;
  void (*declare)(Flags&);
  int (*run)(Ctx&);
};

const std::string& Ctx::cmd() const { return info_.name; }

// --- watch -----------------------------------------------------------------

struct WatchOptions {
  int64_t after_seq = 0;
  bool print_events = true;      // Human lines (recorded events only).
  bool json_lines = false;       // Every event as one JSON object per line.
  int64_t print_from_ms = 0;     // Human lines only for events at/after this time.
  bool progress = true;          // Bars when a terminal is attached.
};

struct WatchResult {
  int exit = kExitOk;  // Non-zero: already reported.
  v1::CampaignState final_state = v1::CAMPAIGN_STATE_UNSPECIFIED;
  v1::Campaign campaign;  // Final campaign, if it could be read.
  bool have_campaign = false;
  std::string last_message;  // Message of the last CAMPAIGN_STATE/ERROR event.
};

WatchResult Watch(Ctx& ctx, const std::string& name, const WatchOptions& o) {
  WatchResult res;
  FILE* bar_out = nullptr;
  if (o.progress) {
    if (!o.json_lines && o.print_events && ::isatty(STDOUT_FILENO)) {
      bar_out = stdout;
    } else if (::isatty(STDERR_FILENO)) {
      bar_out = stderr;
    }
  }
  ProgressDisplay bars(bar_out);
  // Best effort: the campaign's numbers for the bars and the final summary.
  auto refresh = [&]() -> bool {
    auto c = ctx.Call();
    v1::GetCampaignRequest req;
    req.set_name(name);
    v1::Campaign camp;
    grpc::Status s = ctx.stub().GetCampaign(c.get(), req, &camp);
    if (!s.ok()) return false;
    res.campaign = camp;
    res.have_campaign = true;
    if (bars.enabled()) bars.SetCampaign(camp);
    return true;
  };
  if (bars.enabled()) {
    refresh();
    bars.Draw(true);
  }

  grpc::ClientContext stream_ctx;  // No deadline: a campaign runs for hours.
  v1::WatchCampaignRequest req;
  req.set_name(name);
  req.set_after_seq(o.after_seq);
  auto reader = ctx.stub().WatchCampaign(&stream_ctx, req);
  v1::Event ev;
  v1::CampaignState last_state = v1::CAMPAIGN_STATE_UNSPECIFIED;
  int64_t last_seq = o.after_seq;
  while (reader->Read(&ev)) {
    if (ev.seq() > last_seq) last_seq = ev.seq();
    switch (ev.kind()) {
      case v1::CAMPAIGN_STATE:
        last_state = ev.campaign_state();
        res.last_message = ev.message();
        break;
      case v1::ERROR:
        res.last_message = ev.message();
        break;
      case v1::TRIP_STARTED:
        bars.TripStarted(ev.trip(), ev.holder());
        break;
      case v1::PROGRESS:
      case v1::PROVISIONED:
        bars.TripBytes(ev.trip(), ev.holder(), ev.bytes(), ev.total_bytes());
        break;
      case v1::TRIP_FINISHED:
        bars.TripFinished();
        if (bars.enabled()) refresh();
        break;
      default:
        break;
    }
    bool recorded = !(ev.kind() == v1::PROGRESS && ev.seq() == 0);
    if (o.json_lines) {
      bars.Clear();
      ctx.PrintJson(ToJson(ev));
      bars.Draw(true);
    } else if (o.print_events && recorded && ev.time_unix_ms() >= o.print_from_ms) {
      bars.Clear();
      std::printf("%s\n", EventLine(ev).c_str());
      std::fflush(stdout);
      bars.Draw(true);
    } else {
      bars.Draw(false);
    }
  }
  grpc::Status st = reader->Finish();
  bars.Clear();
  if (!st.ok()) {
    res.exit = ctx.RpcError(st, "WatchCampaign",
                            ExitCodeFor(st.error_code()) == kExitUnreachable
                                ? "to continue after the last event received, watch again "
                                  "with --after_seq=" + std::to_string(last_seq)
                                : "");
    return res;
  }
  // Best effort: the final campaign for the summary (and the state if the
  // stream did not carry it, e.g. when --after_seq skipped past it).
  bool have = refresh();
  if (IsFinal(last_state)) {
    res.final_state = last_state;
  } else if (have && IsFinal(res.campaign.state())) {
    res.final_state = res.campaign.state();
  } else {
    std::string now = have ? StateName(res.campaign.state()) : "unknown";
    res.exit = ctx.Fail(kExitFailed, "the event stream of campaign '" + name +
                                         "' ended before a final state (state: " + now + ")");
  }
  return res;
}

void CommonFlags(Flags& f) {
  f.String("endpoint", Env(kEnvEndpoint),
           "Orchestrator endpoint, \"unix:/path\" or \"host:port\" (env GPUTRAVEL_ENDPOINT).");
  f.String("ca", Env(kEnvCa),
           "Campaign CA certificate (PEM) the orchestrator's certificate must chain to "
           "(env GPUTRAVEL_CA).");
  f.String("cert", Env(kEnvCert),
           "Your operator or scheduler certificate (PEM) (env GPUTRAVEL_CERT).");
  f.String("key", Env(kEnvKey), "The private key of --cert (PEM) (env GPUTRAVEL_KEY).");
  f.String("server_name", "orchestrator",
           "Name in the orchestrator's certificate (identity orchestrator/NAME); any other "
           "server is refused.");
  f.String("timeout", "30",
           "Seconds to wait for each call (not applied to the event stream of watch or "
           "cancel --wait).");
  f.Bool("json", "Machine output: protobuf JSON with the proto field names (64-bit "
                 "numbers as strings).");
}

// --- commands ----------------------------------------------------------------

int RunCreate(Ctx& ctx) {
  const std::string path = ctx.flags().positional()[0];
  auto text = ReadFile(path);
  if (!text.ok()) return ctx.Fail(kExitUsage, std::string(text.status().message()));
  nlohmann::json spec = nlohmann::json::parse(*text, nullptr, false);
  if (spec.is_discarded()) {
    return ctx.Fail(kExitUsage, path + " is not valid JSON (checked before sending)");
  }
  if (!spec.is_object()) {
    return ctx.Fail(kExitUsage, path + ": the specification must be a JSON object");
  }
  std::string request_id = ctx.flags().Get("request_id");
  if (request_id.empty()) request_id = RandomRequestId();
  if (request_id.size() > 128) return ctx.Fail(kExitUsage, "--request_id: at most 128 characters");
  for (char c : request_id) {
    if (c < 0x21 || c > 0x7e) {
      return ctx.Fail(kExitUsage, "--request_id: only printable ASCII characters, no spaces");
    }
  }
  if (int rc = ctx.Connect()) return rc;
  const std::string retry = "retry with --request_id=" + request_id;

  v1::CreateCampaignRequest req;
  req.set_request_id(request_id);
  req.set_spec_json(*text);
  v1::CreateCampaignResponse resp;
  auto c = ctx.Call();
  grpc::Status s = ctx.stub().CreateCampaign(c.get(), req, &resp);
  if (!s.ok()) {
    bool transient = ExitCodeFor(s.error_code()) == kExitUnreachable ||
                     ExitCodeFor(s.error_code()) == kExitFailed;
    return ctx.RpcError(s, "CreateCampaign",
                        transient ? retry + " (the same request is never created twice)"
                                  : "request id " + request_id);
  }
  bool started = false;
  if (ctx.flags().IsSet("start")) {
    v1::CampaignRef ref;
    ref.set_name(resp.campaign().name());
    v1::Campaign camp;
    auto c2 = ctx.Call();
    s = ctx.stub().StartCampaign(c2.get(), ref, &camp);
    if (!s.ok()) {
      const std::string shown = TerminalSafe(ref.name());  // The name the server gave.
      return ctx.RpcError(s, "StartCampaign of '" + shown + "' (the campaign is " +
                                 (resp.created() ? "created" : "registered") + ")",
                          "start it with `gputravel start " + shown + "`");
    }
    *resp.mutable_campaign() = camp;
    started = true;
  }
  if (ctx.json()) {
    nlohmann::json j = nlohmann::json::parse(ToJson(resp), nullptr, false);
    if (j.is_discarded()) j = nlohmann::json::object();
    j["request_id"] = request_id;
    j["started"] = started;
    // Never throws: invalid UTF-8 becomes U+FFFD.
    ctx.PrintJson(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return kExitOk;
  }
  std::printf("Request id: %s\n", request_id.c_str());
  if (resp.created()) {
    std::printf("Created campaign '%s'.\n", TerminalSafe(resp.campaign().name()).c_str());
  } else {
    std::printf("Campaign '%s' already existed for this request id (same specification); "
                "nothing new was created.\n",
                TerminalSafe(resp.campaign().name()).c_str());
  }
  if (started) {
    std::printf("Started campaign '%s'.\n", TerminalSafe(resp.campaign().name()).c_str());
  }
  std::printf("\n%s", CampaignSummary(resp.campaign()).c_str());
  return kExitOk;
}

using StateRpc = grpc::Status (v1::Orchestrator::Stub::*)(grpc::ClientContext*,
                                                         const v1::CampaignRef&, v1::Campaign*);

int RunStateChange(Ctx& ctx, StateRpc rpc, const std::string& rpc_name,
                   const std::string& done_text) {
  if (int rc = ctx.Connect()) return rc;
  v1::CampaignRef ref;
  ref.set_name(ctx.flags().positional()[0]);
  v1::Campaign camp;
  auto c = ctx.Call();
  grpc::Status s = (ctx.stub().*rpc)(c.get(), ref, &camp);
  if (!s.ok()) return ctx.RpcError(s, rpc_name + " '" + ref.name() + "'");
  if (ctx.json()) {
    ctx.PrintJson(ToJson(camp));
  } else {
    std::printf("%s\n\n%s", done_text.c_str(), CampaignSummary(camp).c_str());
  }
  return kExitOk;
}

int RunStart(Ctx& ctx) {
  const std::string n = ctx.flags().positional()[0];
  return RunStateChange(ctx, &v1::Orchestrator::Stub::StartCampaign, "StartCampaign",
                        "Started campaign '" + n + "'.");
}

int RunPause(Ctx& ctx) {
  const std::string n = ctx.flags().positional()[0];
  return RunStateChange(ctx, &v1::Orchestrator::Stub::PauseCampaign, "PauseCampaign",
                        "Pause requested for campaign '" + n +
                            "': the trip in progress completes (and is scrubbed), then no "
                            "new trip starts.");
}

int RunResume(Ctx& ctx) {
  const std::string n = ctx.flags().positional()[0];
  return RunStateChange(ctx, &v1::Orchestrator::Stub::ResumeCampaign, "ResumeCampaign",
                        "Resumed campaign '" + n + "'.");
}

int RunCancel(Ctx& ctx) {
  const std::string name = ctx.flags().positional()[0];
  if (!ctx.flags().IsSet("wait")) {
    return RunStateChange(ctx, &v1::Orchestrator::Stub::CancelCampaign, "CancelCampaign",
                          "Cancel requested for campaign '" + name +
                              "': a trip in progress is aborted and made safe first. "
                              "Use --wait or `gputravel watch " + name +
                              "` to see the final state.");
  }
  if (int rc = ctx.Connect()) return rc;
  v1::CampaignRef ref;
  ref.set_name(name);
  v1::Campaign camp;
  auto c = ctx.Call();
  grpc::Status s = ctx.stub().CancelCampaign(c.get(), ref, &camp);
  if (!s.ok()) return ctx.RpcError(s, "CancelCampaign '" + name + "'");
  v1::Campaign final_camp = camp;
  v1::CampaignState final_state = camp.state();
  std::string last_message;
  if (!IsFinal(camp.state())) {
    if (!ctx.json()) {
      std::printf("Cancelling campaign '%s'; waiting for the trip in progress to be made "
                  "safe...\n",
                  name.c_str());
      std::fflush(stdout);
    }
    WatchOptions o;
    o.print_events = !ctx.json();
    o.print_from_ms = camp.updated_unix_ms();  // Only what happened since the cancel.
    WatchResult w = Watch(ctx, name, o);
    if (w.exit != kExitOk) return w.exit;
    final_state = w.final_state;
    last_message = w.last_message;
    if (w.have_campaign) final_camp = w.campaign;
    final_camp.set_state(final_state);
  }
  if (ctx.json()) {
    ctx.PrintJson(ToJson(final_camp));
  } else {
    std::printf("\n%s", CampaignSummary(final_camp).c_str());
  }
  if (final_state == v1::CANCELLED) return kExitOk;
  std::string why =
      TerminalSafe(!final_camp.error().empty() ? final_camp.error() : last_message);
  return ctx.Fail(kExitFailed, "campaign '" + name + "' ended " + StateName(final_state) +
                                   ", not CANCELLED" + (why.empty() ? "" : ": " + why));
}

int RunStatus(Ctx& ctx) {
  if (int rc = ctx.Connect()) return rc;
  v1::GetCampaignRequest req;
  req.set_name(ctx.flags().positional()[0]);
  req.set_include_trips(ctx.flags().IsSet("trips"));
  v1::Campaign camp;
  auto c = ctx.Call();
  grpc::Status s = ctx.stub().GetCampaign(c.get(), req, &camp);
  if (!s.ok()) return ctx.RpcError(s, "GetCampaign '" + req.name() + "'");
  if (ctx.json()) {
    ctx.PrintJson(ToJson(camp));
    return kExitOk;
  }
  std::string out = CampaignSummary(camp);
  out += "\nHolders:\n";
  out += camp.holders_size() == 0 ? "  (none yet)\n" : HoldersTable(camp.holders(), false);
  if (req.include_trips()) {
    out += "\nTrips:\n";
    out += camp.trips_size() == 0 ? "  (none yet)\n" : TripsTable(camp);
  }
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

int RunList(Ctx& ctx) {
  if (int rc = ctx.Connect()) return rc;
  v1::ListCampaignsResponse resp;
  auto c = ctx.Call();
  grpc::Status s = ctx.stub().ListCampaigns(c.get(), v1::ListCampaignsRequest(), &resp);
  if (!s.ok()) return ctx.RpcError(s, "ListCampaigns");
  if (ctx.json()) {
    ctx.PrintJson(ToJson(resp));
    return kExitOk;
  }
  if (resp.campaigns_size() == 0) {
    std::printf("No campaigns.\n");
    return kExitOk;
  }
  Table t({"NAME", "STATE", "GPU", "TRIPS OK", "FAILED", "PROGRESS", "LAST LOSS", "UPDATED"},
          {3, 4, 5, 6});
  for (const auto& cp : resp.campaigns()) {
    t.Add({TerminalSafe(cp.name()), StateName(cp.state()),
           cp.gpu().empty() ? "-" : TerminalSafe(cp.gpu()),
           U64(cp.trips_ok()), U64(cp.trips_failed()), Progress(cp),
           cp.has_loss() ? FormatLoss(cp.last_loss()) : "-",
           FormatTime(cp.updated_unix_ms(), false)});
  }
  std::fputs(t.Render().c_str(), stdout);
  return kExitOk;
}

int RunHolders(Ctx& ctx) {
  if (int rc = ctx.Connect()) return rc;
  v1::ListHoldersRequest req;
  req.set_campaign(ctx.flags().Get("campaign"));
  v1::ListHoldersResponse resp;
  auto c = ctx.Call();
  grpc::Status s = ctx.stub().ListHolders(c.get(), req, &resp);
  if (!s.ok()) {
    return ctx.RpcError(s, req.campaign().empty() ? "ListHolders"
                                                  : "ListHolders of '" + req.campaign() + "'");
  }
  if (ctx.json()) {
    ctx.PrintJson(ToJson(resp));
    return kExitOk;
  }
  if (resp.holders_size() == 0) {
    std::printf("No holders.\n");
    return kExitOk;
  }
  std::fputs(HoldersTable(resp.holders(), true).c_str(), stdout);
  return kExitOk;
}

int RunGpus(Ctx& ctx) {
  if (int rc = ctx.Connect()) return rc;
  v1::ListCampaignGpusResponse resp;
  auto c = ctx.Call();
  grpc::Status s = ctx.stub().ListGpus(c.get(), v1::ListCampaignGpusRequest(), &resp);
  if (!s.ok()) return ctx.RpcError(s, "ListGpus");
  if (ctx.json()) {
    ctx.PrintJson(ToJson(resp));
    return kExitOk;
  }
  if (resp.gpus_size() == 0) {
    std::printf("No GPUs.\n");
    return kExitOk;
  }
  Table t({"GPU", "SERIAL", "CAMPAIGN"});
  for (const auto& g : resp.gpus()) {
    t.Add({TerminalSafe(g.name()),
           g.serial().empty() ? "(any certified device)" : TerminalSafe(g.serial()),
           g.campaign().empty() ? "(idle)" : TerminalSafe(g.campaign())});
  }
  std::fputs(t.Render().c_str(), stdout);
  return kExitOk;
}

int RunWatch(Ctx& ctx) {
  const std::string name = ctx.flags().positional()[0];
  const std::string after = ctx.flags().Get("after_seq");
  char* end = nullptr;
  long long after_seq = std::strtoll(after.c_str(), &end, 10);
  if (after.empty() || *end != '\0' || after_seq < 0) {
    return ctx.Fail(kExitUsage, "--after_seq must be an integer >= 0");
  }
  if (int rc = ctx.Connect()) return rc;
  WatchOptions o;
  o.after_seq = after_seq;
  o.json_lines = ctx.json();
  o.print_events = !ctx.json();
  o.progress = !ctx.flags().IsSet("no_progress");
  WatchResult w = Watch(ctx, name, o);
  if (w.exit != kExitOk) return w.exit;
  std::string why = TerminalSafe(w.have_campaign && !w.campaign.error().empty()
                                     ? w.campaign.error()
                                     : w.last_message);
  if (!ctx.json()) {
    std::string line = "Campaign '" + name + "' " + StateName(w.final_state);
    if (w.have_campaign) {
      const auto& c = w.campaign;
      line += ": " + U64(c.trips_ok()) + " trips ok, " + U64(c.trips_failed()) + " failed, " +
              FormatBytes(c.bytes_provisioned()) + " provisioned";
      if (c.has_loss()) line += ", last loss " + FormatLoss(c.last_loss());
    }
    std::printf("%s.\n", line.c_str());
    std::fflush(stdout);
  }
  switch (w.final_state) {
    case v1::COMPLETED:
      return kExitOk;
    case v1::CANCELLED:
      return kExitCancelled;
    default:
      return ctx.Fail(kExitFailed, "campaign '" + name + "' FAILED" +
                                       (why.empty() ? "" : ": " + why));
  }
}

void NoFlags(Flags&) {}

const std::vector<CommandInfo>& Commands() {
  static const std::vector<CommandInfo>* cmds = new std::vector<CommandInfo>{
      {"create", "SPEC.json", 1, 1, "Register a campaign from its JSON specification.",
       "Registers a campaign from the JSON specification in SPEC.json\n"
       "(docs/campaign-config.md) with CreateCampaign and prints it. The file is\n"
       "checked to be a JSON object before anything is sent. The call is\n"
       "idempotent per request id: without --request_id a random one is made up\n"
       "and printed; repeating the command with the same --request_id and the same\n"
       "file returns the existing campaign instead of creating another. The\n"
       "campaign starts in state CREATED unless --start is given.\n"
       "With --json: {\"campaign\": {...}, \"created\": bool, \"request_id\": \"...\",\n"
       "\"started\": bool}.",
       [](Flags& f) {
         f.String("request_id", "",
                  "Idempotency token (1-128 printable characters); default: a random UUID, "
                  "printed so the command can be retried safely.");
         f.Bool("start", "Also start the campaign (StartCampaign) once it is registered.");
       },
       RunCreate},
      {"start", "NAME", 1, 1, "Start a CREATED campaign.",
       "Moves campaign NAME from CREATED to RUNNING (StartCampaign) and prints it.\n"
       "Starting a RUNNING campaign changes nothing; any other state is refused\n"
       "(exit 4). A campaign whose GPU is busy waits in RUNNING until it is free.",
       NoFlags, RunStart},
      {"pause", "NAME", 1, 1, "Pause a RUNNING campaign at the next safe point.",
       "Asks the orchestrator to pause campaign NAME (PauseCampaign): the trip in\n"
       "progress completes (its buffer scrubbed), then no new trip starts. Pausing\n"
       "a PAUSED campaign changes nothing. Prints the campaign.",
       NoFlags, RunPause},
      {"resume", "NAME", 1, 1, "Resume a PAUSED (or CREATED) campaign.",
       "Moves campaign NAME from PAUSED (or CREATED) to RUNNING (ResumeCampaign);\n"
       "holders that failed under the \"pause\" failure policy get another chance.\n"
       "Prints the campaign.",
       NoFlags, RunResume},
      {"cancel", "NAME", 1, 1, "Cancel a campaign (safely aborting the trip in progress).",
       "Cancels campaign NAME (CancelCampaign): a trip in progress is aborted and\n"
       "made safe (GPU routed home, re-keyed, buffer scrubbed and verified), then\n"
       "the campaign becomes CANCELLED. Without --wait the command returns once the\n"
       "state is CANCELLING or CANCELLED. Cancelling a finished campaign is refused\n"
       "(exit 4). With --wait it follows the event stream (printing what happens\n"
       "from the cancel on; with --json only the final campaign) and exits 0 once\n"
       "the campaign is CANCELLED, 1 if it ended otherwise.",
       [](Flags& f) {
         f.Bool("wait", "Follow the campaign's events until it reaches a final state; exit 0 "
                        "only if that is CANCELLED.");
       },
       RunCancel},
      {"status", "NAME", 1, 1, "Show a campaign: state, progress, holders (and trips).",
       "Prints campaign NAME (GetCampaign): state, GPU, trips ok/failed, bytes\n"
       "provisioned of the total with a percentage, the last training loss, and a\n"
       "table of its holders (state, round, cursor, trips, bytes, error). With\n"
       "--trips also a table of every trip (id, holder, round, window, step,\n"
       "outcome, bytes, MB/s, loss, digest/scrub/re-key checks, error).",
       [](Flags& f) { f.Bool("trips", "Also list every trip of the campaign."); },
       RunStatus},
      {"watch", "NAME", 1, 1, "Follow a campaign's events until it finishes.",
       "Streams the events of campaign NAME (WatchCampaign): first the recorded ones\n"
       "after --after_seq, then live ones, one line each (time UTC, trip, holder,\n"
       "kind, step, message, loss). On a terminal, progress bars for the current\n"
       "provisioning (bytes of the trip, rate) and for the campaign (bytes\n"
       "provisioned of the total, trips) are redrawn in place below the events\n"
       "(on stdout, or on stderr when only stderr is a terminal); never when the\n"
       "output is not a terminal. With --json every event, the live PROGRESS\n"
       "events (seq 0) included, is printed as one JSON object per line. The\n"
       "stream ends after the campaign reaches a final state; the exit code says\n"
       "which: 0 COMPLETED, 1 FAILED, 7 CANCELLED.",
       [](Flags& f) {
         f.String("after_seq", "0",
                  "Replay only recorded events with a sequence number above N (0: all).");
         f.Bool("no_progress", "Never draw progress bars, even on a terminal.");
       },
       RunWatch},
      {"list", "", 0, 0, "List every campaign, newest first.",
       "Prints a table of every campaign (ListCampaigns): name, state, GPU, trips\n"
       "ok and failed, progress (bytes provisioned of the total), last loss and\n"
       "the time of the last change (UTC).",
       NoFlags, RunList},
      {"holders", "", 0, 0, "List the data holders and their progress.",
       "Prints the holders of every campaign, or of one with --campaign\n"
       "(ListHolders): campaign, holder, state, round, cursor (of the dataset size),\n"
       "successful trips, bytes provisioned, endpoint and error.",
       [](Flags& f) {
         f.String("campaign", "", "Only this campaign's holders (default: every campaign's).");
       },
       RunHolders},
      {"gpus", "", 0, 0, "List the GPUs the orchestrator drives and their campaigns.",
       "Prints the GPUs this orchestrator drives (ListGpus): name at the MUX, the\n"
       "pinned device serial, and the campaign currently running on it.",
       NoFlags, RunGpus},
  };
  return *cmds;
}

const CommandInfo* Find(const std::string& cmd) {
  for (const auto& c : Commands()) {
    if (c.name == cmd) return &c;
  }
  return nullptr;
}

void DiscardGrpcLog(gpr_log_func_args*) {}

}  // namespace

bool IsClientCommand(const std::string& cmd) { return Find(cmd) != nullptr; }

std::string ClientCommandsHelp() {
  std::string out;
  for (const auto& c : Commands()) {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "  %-8s%s\n", c.name.c_str(), c.summary.c_str());
    out += buf;
  }
  return out;
}

int RunClientCommand(int argc, char** argv) {
  // gRPC's own log lines would break the "gputravel CMD: message" error
  // format; every failure is reported from the call's status instead.
  // GRPC_VERBOSITY or GRPC_TRACE in the environment keep them for debugging.
  if (!std::getenv("GRPC_VERBOSITY") && !std::getenv("GRPC_TRACE")) {
    gpr_set_log_function(DiscardGrpcLog);
  }
  if (argc < 2) {
    std::fprintf(stderr, "gputravel: missing command\n");
    return kExitUsage;
  }
  const CommandInfo* info = Find(argv[1]);
  if (!info) {
    std::fprintf(stderr, "gputravel: unknown command '%s'\n", argv[1]);
    return kExitUsage;
  }
  std::string usage = "gputravel " + info->name + (info->args.empty() ? "" : " " + info->args);
  Flags flags(usage, info->description);
  info->declare(flags);
  CommonFlags(flags);
  absl::Status ps = flags.Parse(argc, argv, 2);
  // --help wins even when another flag is wrong (Parse stops at the first error).
  bool help = flags.help_requested();
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") help = true;
  }
  if (help) {
    std::printf("%s%s", flags.Help().c_str(), kExitCodesHelp);
    std::fflush(stdout);
    return kExitOk;
  }
  Ctx ctx(*info, flags);
  if (!ps.ok()) return ctx.Fail(kExitUsage, std::string(ps.message()));
  int n = static_cast<int>(flags.positional().size());
  if (n < info->min_args || n > info->max_args) {
    std::string want = info->args.empty() ? "no arguments" : info->args;
    return ctx.Fail(kExitUsage, "expected " + want + ", got " + std::to_string(n) +
                                    " argument(s); usage: " + usage + " [flags] (see --help)");
  }
  const std::string t = flags.Get("timeout");
  char* end = nullptr;
  double secs = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || !(secs > 0) || secs > 86400 * 365) {
    return ctx.Fail(kExitUsage, "--timeout must be a positive number of seconds");
  }
  ctx.set_timeout(std::chrono::milliseconds(static_cast<int64_t>(std::ceil(secs * 1000))));
  int rc = info->run(ctx);
  std::fflush(stdout);
  std::fflush(stderr);
  return rc;
}

}  // namespace gputravel
