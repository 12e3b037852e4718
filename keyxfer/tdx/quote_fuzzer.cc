// libFuzzer entry point for the TDX quote parser: the parser is the first
// code to touch bytes a remote, possibly hostile, party sent. Built with clang
// by tools/fuzz.sh (tools/fuzzer.bzl); quote_fuzzer_replay_test replays its corpus.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "keyxfer/tdx/quote.h"

namespace {

// Invariants of a successful parse; a violation is as much a bug as a crash.
void CheckInvariants(const gputravel::tdx::Quote& q, size_t input_size) {
  using namespace gputravel::tdx;  // NOLINT
  size_t body = q.body_type == kBodyTypeTdx15 ? kTdReport15Bytes
                                              : kTdReport10Bytes;
  size_t descriptor = q.header.version == 5 ? 6 : 0;
  if (q.length > input_size || q.length > kMaxQuoteBytes ||
      q.signed_bytes.size() != kQuoteHeaderBytes + descriptor + body ||
      q.pck_chain_pem.empty() ||
      q.body.tee_tcb_svn_2.has_value() != (q.body_type == kBodyTypeTdx15) ||
      q.header.attestation_key_type != kAttestationKeyEcdsaP256 ||
      q.header.tee_type != kTeeTypeTdx) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto quote = gputravel::tdx::ParseQuote(
      absl::Span<const uint8_t>(data, size));
  if (quote.ok()) CheckInvariants(*quote, size);
  return 0;
}
