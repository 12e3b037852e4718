#include "cli/init_command.h"

#include <cstdio>

#include "auth/identity.h"
#include "cli/terminal_text.h"
#include "cli/user_path.h"
#include "util/flags.h"

namespace gputravel {

std::string InitNextSteps(const Deployment& d) {
  std::string out;
  if (d.tdx) {
    out += "Wrote a template for TDX hardware in " + d.dir +
           ": every value only you know reads REPLACE-WITH-...\n"
           "Next (docs/operations.md, \"Deploy by hand\"):\n"
           "  gputravel config check " + d.dir + "    # lists every value still to supply\n";
    out += "  inside each TD, make its key and have the CA in " + d.tls_dir() + " sign it:\n";
    out += "    gputravel pki csr --out /etc/gputravel/pki --role orchestrator --name orchestrator\n";
    for (const auto& h : d.holders) {
      out += "    gputravel pki csr --out /etc/gputravel/pki --role holder --name " + h.name + "\n";
    }
    out += "    gputravel pki sign --dir " + d.tls_dir() + " --csr ROLE-NAME.csr --role ROLE "
           "--name NAME\n";
    out += "  measure each daemon (gputravel measure) and put the events in its peers' "
           "peer_rtmr3\n";
    out += "  install the units of " + d.dir + "/systemd (docs/operations.md, \"systemd units\"), "
           "and each configuration where its unit reads it:\n";
    for (const auto& dm : d.daemons) {
      out += "    " + d.config_path(dm.name) + " -> " + dm.config + "\n";
    }
    for (const auto& h : d.holders) {
      out += "    " + d.dir + "/" + h.name + ".tmpfiles.conf -> /etc/tmpfiles.d/gputravel.conf "
             "(in " + h.name + "'s TD)\n";
    }
    out += "  then, with the daemons running: . " + d.operator_env_path() +
           " (its endpoint filled in), gputravel create " + d.campaign_spec_path() +
           " --start\n";
    return out;
  }
  out += "Wrote an emulated deployment in " + d.dir + " (" +
         std::to_string(d.holders.size()) + " holders; every file is listed in\n"
         "docs/operations.md, \"Deploy by hand\"). Next:\n";
  out += "  gputravel up " + d.dir + "        # starts the GPU, the MUX, the holders, "
         "the orchestrator\n";
  out += "  . " + d.operator_env_path() + "      # in another shell: the operator's "
         "endpoint and TLS files\n";
  for (const auto& h : d.holders) {
    out += "  gputravel holders check --holder_endpoint " + h.endpoint + " --name " + h.name +
           " --domain " + h.domain + " --dataset " + h.dataset + "\n";
  }
  out += "  gputravel create " + d.campaign_spec_path() + " --start\n";
  out += "  gputravel watch " + d.campaign_spec.value("name", std::string("demo")) + "\n";
  return out;
}

int InitCommand(int argc, char** argv) {
  Flags flags("gputravel init DIR",
              "Writes a complete deployment to DIR (created 0700; an existing DIR must be\n"
              "empty): the campaign CA and a certificate per identity (pki/tls), the\n"
              "emulated GPU's identity and device CA and the development attestation\n"
              "identities (pki), every daemon's configuration (device.json, mux.json,\n"
              "holder-*.json, orchestrator.json), the holders' datasets (data), a\n"
              "campaign spec (campaign.json), the operator's environment\n"
              "(operator.env) and the list of daemons to start (deployment.json).\n"
              "Keys are 0600, directories 0700. The orchestrator and the holders pin\n"
              "each other's binaries by path (development attestation only), so a\n"
              "rebuild needs a restart, never an edited file. Start it with\n"
              "`gputravel up DIR`.\n"
              "With --tdx, a template for real hardware instead: TDX attestation, the\n"
              "MUX's sysfs backend and the paths of the systemd units, no emulated GPU\n"
              "and no development key; every value only the operator knows reads\n"
              "REPLACE-WITH-..., which `gputravel config check` refuses.\n"
              "Exit status: 0 written, 1 if it cannot be written (nothing is\n"
              "overwritten), 2 on bad usage.");
  flags.Int("holders", 3, 1, 16, "Number of data holders (holder-a, holder-b, ...).");
  flags.Bool("tdx", "Write a template for TDX hardware (see above).");
  flags.String("campaign", "demo", "The campaign's name (campaign.json) and its CA's.");
  flags.Int("days", 365, 1, 3650, "Days the certificates are valid (the CA one day longer).");
  flags.Int("buffer_mib", 8, 1, 65536, "The campaign's device buffer in MiB.");
  flags.Int("rounds", 1, 1, 100, "The campaign's passes over every holder's dataset.");
  flags.String("bin_dir", "",
               "Directory of the daemons the deployment runs (default: this program's "
               "Bazel runfiles, or its own directory when installed).");
  absl::Status ps = flags.Parse(argc, argv, 2);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (ps.ok()) ps = flags.OnePositional("the directory DIR");
  if (ps.ok()) ps = ValidateName(flags.Get("campaign"));
  if (!ps.ok()) {
    std::fprintf(stderr, "gputravel init: %s (see --help)\n",
                 TerminalSafe(ps.message()).c_str());
    return 2;
  }
  DeploymentOptions o;
  o.holders = flags.GetInt("holders");
  o.tdx = flags.IsSet("tdx");
  o.campaign = flags.Get("campaign");
  o.valid_days = flags.GetInt("days");
  o.buffer_bytes = static_cast<uint64_t>(flags.GetInt("buffer_mib")) << 20;
  o.rounds = static_cast<uint32_t>(flags.GetInt("rounds"));
  o.bin_dir = flags.Get("bin_dir").empty() ? "" : UserPath(flags.Get("bin_dir"));
  auto d = WriteDeployment(UserPath(flags.positional()[0]), o);
  if (!d.ok()) {
    std::fprintf(stderr, "gputravel init: %s\n", TerminalSafe(d.status().message()).c_str());
    return 1;
  }
  std::printf("%s", InitNextSteps(*d).c_str());
  return 0;
}

}  // namespace gputravel
