"""Mutual-TLS gRPC channels to GPU Travelling daemons, from the PKI files.

The files are those `gputravel pki` issues (docs/cli.md) and the C++ CLI
reads: the campaign CA certificate, your certificate and its private key,
named by arguments or by the CLI's environment variables GPUTRAVEL_ENDPOINT,
GPUTRAVEL_CA, GPUTRAVEL_CERT and GPUTRAVEL_KEY. The server must present a
certificate that chains to the CA and names the expected identity: its SAN
DNS name "<name>.<role>.gputravel" (auth/identity.h) is the TLS target name,
so any other party of the campaign (a holder, the MUX) is refused.

Not checked here, unlike the C++ CLI: the campaign CRL (gRPC Python has no
hook for it); use the C++ CLI where a revoked orchestrator must be refused.
"""

import dataclasses
import os
import stat

import grpc

ENV_ENDPOINT = "GPUTRAVEL_ENDPOINT"
ENV_CA = "GPUTRAVEL_CA"
ENV_CERT = "GPUTRAVEL_CERT"
ENV_KEY = "GPUTRAVEL_KEY"

# util/grpc_status.h kMaxMessageBytes: the largest message either side sends.
MAX_MESSAGE_BYTES = 64 << 20
# auth/tls_config.h: keepalive for long streams (watch, the trainer's Attach),
# so a vanished host fails the call instead of hanging it.
KEEPALIVE_TIME_MS = 20000
KEEPALIVE_TIMEOUT_MS = 10000


class ConfigError(ValueError):
    """A local file or argument is missing or unusable; the message names it."""


@dataclasses.dataclass(frozen=True)
class TlsFiles:
    """Paths of one party's mTLS material (PEM)."""
    ca: str
    cert: str
    key: str

    @classmethod
    def from_env(cls, ca=None, cert=None, key=None):
        """The given paths, each defaulting to its GPUTRAVEL_* variable."""
        return cls(ca or os.environ.get(ENV_CA, ""), cert or os.environ.get(ENV_CERT, ""),
                   key or os.environ.get(ENV_KEY, ""))

    def read(self):
        """(ca, cert, key) bytes; ConfigError naming the file that fails."""
        out = []
        for flag, env, path in (("ca", ENV_CA, self.ca), ("cert", ENV_CERT, self.cert),
                                ("key", ENV_KEY, self.key)):
            if not path:
                raise ConfigError("missing %s (pass it, or set %s)" % (flag, env))
            try:
                with open(path, "rb") as f:
                    out.append(f.read())
                mode = os.stat(path).st_mode
            except OSError as e:
                raise ConfigError("%s: cannot read %s: %s" % (flag, path, e.strerror))
            if flag == "key" and mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise ConfigError("key: %s may be read by others (mode %o): chmod 600 it"
                                  % (path, stat.S_IMODE(mode)))
        return tuple(out)


def server_name_for(role, name):
    """The TLS name of identity role/name (auth/identity.h ServerNameFor)."""
    return "%s.%s.gputravel" % (name, role)


def secure_channel(endpoint, files, server_role="orchestrator", server_name="orchestrator",
                   keepalive=True):
    """A channel to `endpoint` ("unix:/path" or "host:port") that presents
    files.cert and accepts only a server of identity server_role/server_name
    whose certificate chains to files.ca."""
    if not endpoint:
        raise ConfigError("missing endpoint (pass it, or set %s)" % ENV_ENDPOINT)
    ca, cert, key = files.read()
    creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key,
                                         certificate_chain=cert)
    options = [
        ("grpc.ssl_target_name_override", server_name_for(server_role, server_name)),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ]
    if keepalive:
        options += [
            ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
            ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
            ("grpc.keepalive_permit_without_calls", 0),
            ("grpc.http2.max_pings_without_data", 0),
        ]
    return grpc.secure_channel(endpoint, creds, options=options)
