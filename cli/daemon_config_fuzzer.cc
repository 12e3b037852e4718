// libFuzzer entry point for the daemons' configuration parsers: the
// orchestrator's, a holder agent's, the MUX's and the emulated GPU's. Plain
// C++ so gcc builds it; daemon_config_fuzzer_replay_test replays the corpus
// with it (tools/fuzzer.bzl).
//   input = kind (1 byte: 0 orchestrator, 1 holder, 2 MUX, 3 emulated GPU,
//           modulo 4) || the configuration's text
// The parsers read the files a configuration names (TLS certificates and
// keys, the device identity): LLVMFuzzerInitialize writes a campaign PKI and
// the development PKI into a temporary directory laid out as `gputravel
// init` lays out a deployment, and every "$DIR" in the text names it, so the
// seeds (configurations `gputravel init` wrote, their directory replaced by
// $DIR) reach the checks behind the TLS section.
#include <sys/stat.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_replace.h"
#include "auth/identity.h"
#include "auth/pki.h"
#include "cli/dev_pki.h"
#include "device/emulated_gpu_config.h"
#include "holder_agent/holder_config.h"
#include "orchestrator/daemon_config.h"
#include "util/json_text.h"
#include "vfio_mux/mux_config.h"

namespace {

std::string* g_dir = nullptr;

void Check(const absl::Status& st, const char* what) {
  if (!st.ok()) {
    std::fprintf(stderr, "daemon_config_fuzzer: %s: %s\n", what, st.ToString().c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string pattern = std::string(tmp ? tmp : "/tmp") + "/daemon-config-fuzz-XXXXXX";
  if (mkdtemp(&pattern[0]) == nullptr) std::abort();
  g_dir = new std::string(pattern);
  if (::mkdir((*g_dir + "/pki").c_str(), 0700) != 0) std::abort();
  const std::string tls = *g_dir + "/pki/tls";
  Check(gputravel::InitCampaignCa(tls, "demo", 31), "campaign CA");
  for (const gputravel::Identity& id :
       {gputravel::Identity{gputravel::kRoleOrchestrator, "orchestrator"},
        gputravel::Identity{gputravel::kRoleHolder, "hospital-a"},
        gputravel::Identity{gputravel::kRoleMux, "mux"}}) {
    Check(gputravel::IssueIdentity(tls, id, 30).status(), "identity");
  }
  Check(gputravel::CreateDevPki(*g_dir + "/pki", "EMU-H100-0001",
                                {"orchestrator", "td-hospital-a"})
            .status(),
        "development PKI");
  // The emulated GPU's shared directories must exist.
  for (const char* domain : {"orchestrator", "td-hospital-a"}) {
    for (const std::string& d : {*g_dir + "/shm", *g_dir + "/shm/" + domain}) {
      if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) std::abort();
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text = absl::StrReplaceAll(
      std::string(reinterpret_cast<const char*>(data + 1), size - 1), {{"$DIR", *g_dir}});
  auto j = gputravel::ParseJsonText(text, "fuzz.json");
  if (!j.ok()) return 0;
  const std::string where = "fuzz.json";
  switch (data[0] % 4) {
    case 0:
      (void)gputravel::ParseOrchestratorConfig(*j, where);
      break;
    case 1:
      (void)gputravel::ParseHolderConfig(*j, where);
      break;
    case 2:
      (void)gputravel::ParseMuxConfig(*j, where);
      break;
    default:
      (void)gputravel::ParseEmulatedGpuConfig(*j, where);
      break;
  }
  return 0;
}
