#ifndef GPUTRAVEL_KEYXFER_RUNTIME_POLICY_H_
#define GPUTRAVEL_KEYXFER_RUNTIME_POLICY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "keyxfer/attester.h"
#include "keyxfer/runtime_measurement.h"
#include "nlohmann/json.hpp"

namespace gputravel {

// What a relying party requires of a peer's RTMR3 events
// (keyxfer/runtime_measurement.h), from the attestation section's
// "peer_rtmr3":
//   {"binary": "<96 hex>" or [...], "config": "<96 hex>" or [...],
//    "peer_pins": "<96 hex>" or [...]}           (peer_pins optional)
// binary and config are required: without them a peer whose host swapped
// its binary or configuration would pass. peer_pins is left out where the
// peer's own pins are its business (the orchestrator pinning holders, whose
// pins name the orchestrator and would make the two pins circular).
struct Rtmr3Policy {
  std::vector<std::string> binary, config, peer_pins;  // 48-byte values; empty: unchecked

  // Errors name `where` ("orch.json: attestation.peer_rtmr3") and the field.
  static absl::StatusOr<Rtmr3Policy> FromJson(const nlohmann::json& j, const std::string& where);

  // OK when evidence.rtmr3_events are three 48-byte digests that replay to
  // `rtmr3` (the register from the authenticated report) and each is among
  // the allowed values. Errors are kPermissionDenied, naming the event with
  // the expected and actual values.
  absl::Status Check(const std::vector<uint8_t>& rtmr3, const Evidence& evidence) const;
};

// Adds this daemon's RTMR3 events to the evidence `inner` produces, so a
// verifier can replay them against the register in the report. The events
// are public: a verifier trusts them only because they replay to the
// authenticated register.
class MeasuredAttester : public Attester {
 public:
  MeasuredAttester(std::unique_ptr<Attester> inner, RuntimeMeasurement measurement)
      : inner_(std::move(inner)), measurement_(std::move(measurement)) {}
  absl::StatusOr<Evidence> Attest(const ReportData& report_data) override;

 private:
  std::unique_ptr<Attester> inner_;
  const RuntimeMeasurement measurement_;
};

// Verifies with `inner` (authenticity, report data, register policy), then
// the peer's RTMR3 events against `policy`.
class MeasuredVerifier : public Verifier {
 public:
  MeasuredVerifier(std::unique_ptr<Verifier> inner, Rtmr3Policy policy)
      : inner_(std::move(inner)), policy_(std::move(policy)) {}
  absl::StatusOr<AttestedIdentity> Verify(const Evidence& evidence,
                                          const ReportData& expected_report_data) override;

 private:
  std::unique_ptr<Verifier> inner_;
  const Rtmr3Policy policy_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_RUNTIME_POLICY_H_
