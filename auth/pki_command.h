#ifndef GPUTRAVEL_AUTH_PKI_COMMAND_H_
#define GPUTRAVEL_AUTH_PKI_COMMAND_H_

namespace gputravel {

// `gputravel pki SUBCOMMAND [flags]` (argv[0] = "gputravel", argv[1] = "pki"):
//   pki init  --dir DIR --campaign NAME [--days N]
//   pki issue --dir DIR --role ROLE --name NAME [--days N]
//   pki show  --cert FILE [--json]
//   pki mux-kit --dir DIR --out OUT [--mux NAME] [--callers ROLE/NAME,...]
//     (the host's side: the MUX's TLS files and the caller certificates its
//     administrator pins; never the CA's key)
// Exit status: 0 success, 1 failure, 2 usage error. Prints the paths written;
// never prints key material.
int PkiCommand(int argc, char** argv);

}  // namespace gputravel

#endif  // GPUTRAVEL_AUTH_PKI_COMMAND_H_
