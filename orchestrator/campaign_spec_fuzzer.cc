// libFuzzer entry point for campaign specs: the JSON an operator (or any
// caller of CreateCampaign) submits. Plain C++ so gcc builds it;
// campaign_spec_fuzzer_replay_test replays the corpus with it
// (tools/fuzzer.bzl). Beyond not crashing, a spec that parses must survive
// its canonical form: ParseCampaignSpec(CampaignSpecToJson(s)) == s, and
// its canonical text must parse to the same spec.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "orchestrator/campaign_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gputravel::SpecOptions opts;
  opts.known_gpus = {"gpu0", "gpu1"};
  opts.reserved_domains = {"td-orchestrator", "td-mux"};
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = gputravel::ParseCampaignSpecText(text, "fuzz: ", opts);
  if (!spec.ok()) return 0;
  auto again = gputravel::ParseCampaignSpec(gputravel::CampaignSpecToJson(*spec), "fuzz: ", opts);
  if (!again.ok() || *again != *spec) std::abort();
  const std::string canonical = gputravel::CanonicalSpecJson(*spec);
  auto from_text = gputravel::ParseCampaignSpecText(canonical, "fuzz: ", opts);
  if (!from_text.ok() || *from_text != *spec ||
      gputravel::CanonicalSpecJson(*from_text) != canonical) {
    std::abort();
  }
  return 0;
}
