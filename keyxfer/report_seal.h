#ifndef GPUTRAVEL_KEYXFER_REPORT_SEAL_H_
#define GPUTRAVEL_KEYXFER_REPORT_SEAL_H_

#include <string>

#include "absl/status/statusor.h"
#include "keyxfer/secret_bytes.h"
#include "proto/holder.pb.h"

namespace gputravel {

// The holder's provisioning report, sealed under the report key of the
// attested channel that carried the trip's hand-off (AttestedChannel in
// keyxfer/attested_channel.h; docs/protocol.md):
//   sealed = 0x01 || IV (12 random bytes) ||
//            AES-256-GCM(report_key, IV, AAD, serialized ProvisionReport) || tag
//   AAD    = ReportAad(binding): campaign, trip, holder, GPU serial and
//            session, buffer and window of the hand-off.
// Only the holder's attested TD (and the orchestrator) holds the report key,
// so a report made or changed by anyone else, or replayed from another trip
// (another channel and binding), does not open.
inline constexpr uint8_t kReportSealVersion = 1;
// A report is a few numbers and a digest; anything larger is refused unread.
inline constexpr size_t kMaxSealedReportBytes = 4096;

std::string ReportAad(const v1::HandoffBinding& binding);

absl::StatusOr<std::string> SealReport(const SecretBytes& report_key,
                                       const v1::HandoffBinding& binding,
                                       const v1::ProvisionReport& report);

// PERMISSION_DENIED naming the binding's holder, campaign and trip when the
// report was not sealed under `report_key` for `binding` (forged, altered,
// replayed from another trip or channel) or is malformed.
absl::StatusOr<v1::ProvisionReport> OpenReport(const SecretBytes& report_key,
                                               const v1::HandoffBinding& binding,
                                               const std::string& sealed);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_REPORT_SEAL_H_
