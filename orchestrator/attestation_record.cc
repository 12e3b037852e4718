#include "orchestrator/attestation_record.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "util/hex.h"

namespace gputravel {

v1::VerifiedAttestation RecordOf(const AttestedIdentity& peer, int64_t verified_unix_ms) {
  v1::VerifiedAttestation a;
  a.set_format(peer.format);
  a.set_mrtd(HexEncode(absl::MakeConstSpan(peer.mrtd)));
  for (const auto& r : peer.rtmr) a.add_rtmr(HexEncode(absl::MakeConstSpan(r)));
  a.set_td_attributes(peer.td_attributes);
  a.set_tee_tcb_svn(HexEncode(absl::MakeConstSpan(peer.tee_tcb_svn)));
  a.set_tcb_status(peer.tcb_status);
  for (const auto& id : peer.advisory_ids) a.add_advisory_ids(id);
  a.set_collateral_issued_unix(peer.collateral_issued_unix);
  a.set_collateral_next_update_unix(peer.collateral_next_update_unix);
  a.set_verified_unix_ms(verified_unix_ms);
  return a;
}

bool SameAttestation(const v1::VerifiedAttestation& a, const v1::VerifiedAttestation& b) {
  v1::VerifiedAttestation x = a, y = b;
  x.clear_verified_unix_ms();
  y.clear_verified_unix_ms();
  return x.SerializeAsString() == y.SerializeAsString();
}

std::string DescribeAttestation(const v1::VerifiedAttestation& a) {
  auto day = [](int64_t unix) {
    return absl::FormatTime("%Y-%m-%d", absl::FromUnixSeconds(unix), absl::UTCTimeZone());
  };
  std::string out = absl::StrCat(a.format(), " mrtd ", a.mrtd());
  for (int i = 0; i < a.rtmr_size(); ++i) absl::StrAppend(&out, " rtmr", i, " ", a.rtmr(i));
  if (!a.tcb_status().empty()) {
    absl::StrAppend(&out, " TCB ", a.tcb_status());
    if (a.advisory_ids_size() > 0) {
      absl::StrAppend(&out, " (advisories ", absl::StrJoin(a.advisory_ids(), ", "), ")");
    }
    absl::StrAppend(&out, ", collateral issued ", day(a.collateral_issued_unix()),
                    ", next update ", day(a.collateral_next_update_unix()));
  }
  return out;
}

}  // namespace gputravel
