#include "keyxfer/report_seal.h"

#include <string>

#include "keyxfer/aes_gcm.h"
#include "keyxfer/random.h"
#include "keyxfer/wire.h"

namespace gputravel {
namespace {

absl::Status Refused(const v1::HandoffBinding& b, const std::string& why) {
  return absl::PermissionDeniedError(
      "provisioning report of holder '" + b.holder() + "' for trip " + std::to_string(b.trip()) +
      " of campaign '" + b.campaign() + "' refused: " + why +
      " (a report must be sealed by the holder under the attested channel that carried the "
      "trip's hand-off; this one was forged, altered, or replayed from another trip)");
}

}  // namespace

std::string ReportAad(const v1::HandoffBinding& b) {
  WireWriter w;
  w.Bytes("gputravel-provision-report-v1");
  w.Bytes(b.campaign());
  w.U64(b.trip());
  w.Bytes(b.holder());
  w.Bytes(b.gpu_serial());
  w.U64(b.gpu_session());
  w.U64(b.buffer_id());
  w.U64(b.window_offset());
  w.U64(b.window_length());
  return w.Take();
}

absl::StatusOr<std::string> SealReport(const SecretBytes& report_key,
                                       const v1::HandoffBinding& binding,
                                       const v1::ProvisionReport& report) {
  std::string plain;
  if (!report.SerializeToString(&plain)) {
    return absl::InternalError("cannot serialize the provisioning report");
  }
  auto gcm = AesGcm::Create(report_key);
  if (!gcm.ok()) return gcm.status();
  uint8_t iv[kGcmIvSize];
  RandomBytes(iv, sizeof(iv));
  auto body = (*gcm)->Seal(iv, ReportAad(binding), plain);
  if (!body.ok()) return body.status();
  std::string sealed(1, static_cast<char>(kReportSealVersion));
  sealed.append(reinterpret_cast<const char*>(iv), sizeof(iv));
  sealed += *body;
  if (sealed.size() > kMaxSealedReportBytes) {
    return absl::InternalError("sealed provisioning report is " + std::to_string(sealed.size()) +
                               " bytes, over the " + std::to_string(kMaxSealedReportBytes) +
                               " the orchestrator accepts");
  }
  return sealed;
}

absl::StatusOr<v1::ProvisionReport> OpenReport(const SecretBytes& report_key,
                                               const v1::HandoffBinding& binding,
                                               const std::string& sealed) {
  if (sealed.empty()) return Refused(binding, "it is not sealed");
  if (sealed.size() < 1 + kGcmIvSize + kGcmTagSize || sealed.size() > kMaxSealedReportBytes) {
    return Refused(binding, "a sealed report of " + std::to_string(sealed.size()) +
                                " bytes is malformed");
  }
  if (static_cast<uint8_t>(sealed[0]) != kReportSealVersion) {
    return Refused(binding, "unknown report seal version " +
                                std::to_string(static_cast<uint8_t>(sealed[0])));
  }
  auto gcm = AesGcm::Create(report_key);
  if (!gcm.ok()) return gcm.status();
  const auto* iv = reinterpret_cast<const uint8_t*>(sealed.data() + 1);
  auto plain = (*gcm)->Open(iv, ReportAad(binding),
                            absl::string_view(sealed).substr(1 + kGcmIvSize));
  if (!plain.ok()) return Refused(binding, "its seal does not verify");
  v1::ProvisionReport report;
  if (!report.ParseFromString(*plain)) return Refused(binding, "its contents do not parse");
  return report;
}

}  // namespace gputravel
