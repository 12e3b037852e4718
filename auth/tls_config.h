#ifndef GPUTRAVEL_AUTH_TLS_CONFIG_H_
#define GPUTRAVEL_AUTH_TLS_CONFIG_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "auth/identity.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"

namespace gputravel {

// The checked contents of a party's TLS files (tls_config.cc).
struct TlsMaterial;

// Paths of one party's mTLS material: the campaign CA certificate, its own
// certificate and its own private key (PEM, from `gputravel pki`), and the
// campaign's certificate revocation list.
struct TlsFiles {
  std::string ca;
  std::string cert;
  std::string key;
  // The CRL (`gputravel pki revoke` publishes DIR/crl.pem). Empty: no
  // revocation check. Unlike the other files it is reread whenever it
  // changes (auth/revocation_list.h), at the next handshake.
  std::string crl;
  // Set by ParseTlsConfig: the three files as read and checked then (the key
  // in memory that is wiped when the last copy goes). Server credentials and
  // channels use these and never read the files again, so a file the host
  // replaces after start-up is never picked up (rotate by restarting). Null:
  // the files are read at each use.
  std::shared_ptr<const TlsMaterial> material;
};

// Parses {"ca": PATH, "cert": PATH, "key": PATH, "crl": PATH} ("crl"
// optional but set in every deployment). `where` names the object for
// errors, e.g. "orch.json: tls" gives "orch.json: tls.cert: missing". Checks
// that the three files are readable, that `ca` holds exactly one certificate
// (a CA; gRPC is given that certificate), that the key is the certificate's key,
// that the certificate chains to the CA and is valid now, and that it encodes
// a GPU Travelling identity, and that the key file may be read by its owner
// only (no group or other permission bits), and that the CRL, if named, is
// one the CA signed and the certificate is not on it. Relative paths are used as given
// (relative to the working directory). The result carries the contents read
// (TlsFiles::material).
absl::StatusOr<TlsFiles> ParseTlsConfig(const nlohmann::json& j, const std::string& where);

// FAILED_PRECONDITION unless the CA `files` trusts (TlsFiles::material) was
// read from exactly `ca_file_bytes`: a daemon that measured its tls.ca into
// RTMR3 checks that the CA it uses is the one it measured.
absl::Status RequireTlsCaBytes(const TlsFiles& files, absl::string_view ca_file_bytes);

// The same checks for files given otherwise (flags); errors name the files.
absl::Status CheckTlsFiles(const TlsFiles& files);

class RevocationList;
// The CRL `files` applies (null without tls.crl): for checks after the
// handshake (auth/role_gate.h checks every call against it).
std::shared_ptr<RevocationList> RevocationListOf(const TlsFiles& files);

// The identity in `files.cert`.
absl::StatusOr<Identity> LocalIdentity(const TlsFiles& files);

// Server side of mTLS: presents files.cert, and requires and verifies a client
// certificate chaining to files.ca (GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_
// CERTIFICATE_AND_VERIFY): a client without one fails the TLS handshake and
// its calls never reach a service, and so does a client whose certificate the
// CRL (files.crl) revokes, checked at every handshake. Authorization is then
// Authorize() per call.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files);

// Client keepalive for long-lived calls (`gputravel watch`, `cancel --wait`):
// while a call is open the client pings every kClientKeepaliveTimeMs and,
// when a ping is not answered within kClientKeepaliveTimeoutMs, drops the
// connection so the call fails UNAVAILABLE instead of waiting forever for a
// host that vanished. No pings without an open call. Servers must accept a
// ping this often on a stream that carries no data:
// GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS <= kClientKeepaliveTimeMs
// (util/daemon_main.cc), or gRPC answers the third ping with GOAWAY.
inline constexpr int kClientKeepaliveTimeMs = 20000;
inline constexpr int kClientKeepaliveTimeoutMs = 10000;

struct SecureChannelOptions {
  // GRPC_ARG_KEEPALIVE_TIME_MS = kClientKeepaliveTimeMs,
  // GRPC_ARG_KEEPALIVE_TIMEOUT_MS = kClientKeepaliveTimeoutMs,
  // GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS = 0,
  // GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA = 0 (unlimited).
  bool keepalive = false;
};

// Client side of mTLS to "unix:/path" or "host:port": presents files.cert and
// accepts only a server whose certificate chains to files.ca and names
// `expected_server` (its SAN DNS name ServerNameFor(expected_server), set as
// GRPC_SSL_TARGET_NAME_OVERRIDE_ARG) and encodes exactly that identity, so a
// holder cannot pose as another holder or as the MUX, and whose certificate
// the CRL (files.crl) does not revoke, checked at every handshake; a refused
// server fails the call UNAVAILABLE with the reason in its message ("...
// is revoked ..."). Messages up to kMaxMessageBytes both ways.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeSecureChannel(
    const std::string& endpoint, const TlsFiles& files, const Identity& expected_server,
    const SecureChannelOptions& options = SecureChannelOptions());

}  // namespace gputravel

#endif  // GPUTRAVEL_AUTH_TLS_CONFIG_H_
