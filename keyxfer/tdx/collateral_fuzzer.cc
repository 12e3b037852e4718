// libFuzzer entry point for the collateral parsers: the bundle (a file the
// operator drops in, possibly from an untrusted mirror), Intel's TCB info and
// QE identity bodies, and the PCK certificate's SGX extensions. Plain C++ so
// gcc builds it; collateral_fuzzer_replay_test replays the corpus with it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "keyxfer/tdx/collateral.h"
#include "keyxfer/tdx/pck_extensions.h"
#include "keyxfer/tdx/tcb_info.h"

namespace {

using namespace gputravel::tdx;  // NOLINT

// Invariants of a successful parse; a violation is as much a bug as a crash.
void CheckTcbInfo(const TcbInfo& info) {
  if (info.id != "TDX" || info.version != 3 || info.levels.empty()) std::abort();
  for (const TcbLevel& l : info.levels) {
    if (!IsKnownTcbStatus(l.status)) std::abort();
  }
  for (const TdxModuleIdentity& m : info.tdx_module_identities) {
    if (m.levels.empty()) std::abort();
  }
}

void CheckQeIdentity(const QeIdentity& qe) {
  if (qe.id != "TD_QE" || qe.version != 2 || qe.levels.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto bundle = ParseCollateralBundle(text, "fuzz");
  if (bundle.ok()) {
    if (bundle->pck_crl_der.empty() || bundle->root_ca_crl_der.empty()) {
      std::abort();
    }
    if (auto info = ParseTcbInfo(bundle->tcb_info); info.ok()) {
      CheckTcbInfo(*info);
    }
    if (auto qe = ParseQeIdentity(bundle->qe_identity); qe.ok()) {
      CheckQeIdentity(*qe);
    }
    (void)ParsePckExtensionsPem(bundle->pck_crl_issuer_chain);
  }
  if (auto info = ParseTcbInfo(text); info.ok()) CheckTcbInfo(*info);
  if (auto qe = ParseQeIdentity(text); qe.ok()) CheckQeIdentity(*qe);
  (void)ParsePckExtensionsPem(text);
  return 0;
}
