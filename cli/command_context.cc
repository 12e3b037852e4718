#include "cli/command_context.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "auth/identity.h"
#include "auth/tls_config.h"
#include "cli/terminal_text.h"
#include "google/protobuf/util/json_util.h"

namespace gputravel::cli {
namespace {

constexpr char kEnvEndpoint[] = "GPUTRAVEL_ENDPOINT";
constexpr char kEnvCa[] = "GPUTRAVEL_CA";
constexpr char kEnvCert[] = "GPUTRAVEL_CERT";
constexpr char kEnvKey[] = "GPUTRAVEL_KEY";
constexpr char kEnvCrl[] = "GPUTRAVEL_CRL";

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

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

void CommonFlags(Flags& f) {
  f.String("endpoint", Env(kEnvEndpoint),
           "Orchestrator endpoint, \"unix:/path\" or \"host:port\" (env GPUTRAVEL_ENDPOINT).");
  f.String("ca", Env(kEnvCa),
           "Campaign CA certificate (PEM) the orchestrator's certificate must chain to "
           "(env GPUTRAVEL_CA).");
  f.String("cert", Env(kEnvCert),
           "Your operator or scheduler certificate (PEM) (env GPUTRAVEL_CERT).");
  f.String("key", Env(kEnvKey), "The private key of --cert (PEM) (env GPUTRAVEL_KEY).");
  f.String("crl", Env(kEnvCrl),
           "The campaign's CRL (crl.pem from `gputravel pki revoke`): a revoked orchestrator "
           "certificate is refused; optional (env GPUTRAVEL_CRL).");
  f.String("server_name", "orchestrator",
           "Name in the orchestrator's certificate (identity orchestrator/NAME); any other "
           "server is refused.");
  f.String("timeout", "30",
           "Seconds to wait for each call (not applied to the event stream of watch or "
           "cancel --wait).");
  f.Bool("json", "Machine output: protobuf JSON with the proto field names (64-bit "
                 "numbers as strings).");
}

void NoFlags(Flags&) {}

const std::string& CommandContext::cmd() const { return info_.name; }

int CommandContext::Fail(int code, const std::string& msg) {
  std::fflush(stdout);
  std::fprintf(stderr, "gputravel %s: %s\n", cmd().c_str(), TerminalSafe(msg).c_str());
  return code;
}

int CommandContext::RpcError(const grpc::Status& s, const std::string& what,
                             const std::string& hint) {
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

int CommandContext::Connect() {
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
  TlsFiles files{flags_.Get("ca"), flags_.Get("cert"), flags_.Get("key"), flags_.Get("crl")};
  // Only whether each file can be read, so the error names its flag: the
  // contents (the private key among them) are read once, by
  // MakeSecureChannel, which wipes its copy of the key.
  for (auto [flag, path] : {std::pair<const char*, std::string>{"ca", files.ca},
                            {"cert", files.cert},
                            {"key", files.key},
                            {"crl", files.crl}}) {
    if (!path.empty() && ::access(path.c_str(), R_OK) != 0) {
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

std::unique_ptr<grpc::ClientContext> CommandContext::Call() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + timeout_);
  return ctx;
}

void CommandContext::PrintJson(const std::string& doc) {
  std::fputs(doc.c_str(), stdout);
  std::fputs("\n", stdout);
  std::fflush(stdout);
}

}  // namespace gputravel::cli
