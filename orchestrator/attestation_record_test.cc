#include "orchestrator/attestation_record.h"

#include "gtest/gtest.h"

namespace gputravel {
namespace {

AttestedIdentity Peer() {
  AttestedIdentity p;
  p.format = "tdx";
  p.mrtd = std::vector<uint8_t>(48, 0xab);
  p.rtmr = {std::vector<uint8_t>(48, 0), std::vector<uint8_t>(48, 1),
            std::vector<uint8_t>(48, 2), std::vector<uint8_t>(48, 3)};
  p.td_attributes = 0x10000000;
  p.tee_tcb_svn = std::vector<uint8_t>(16, 7);
  p.tcb_status = "OutOfDate";
  p.advisory_ids = {"INTEL-SA-00837", "INTEL-SA-00960"};
  p.collateral_issued_unix = 1748736000;       // 2025-06-01
  p.collateral_next_update_unix = 1751328000;  // 2025-07-01
  return p;
}

TEST(AttestationRecordTest, RecordsWhatWasVerified) {
  v1::VerifiedAttestation a = RecordOf(Peer(), 1234);
  EXPECT_EQ(a.format(), "tdx");
  std::string mrtd;
  for (int i = 0; i < 48; ++i) mrtd += "ab";
  EXPECT_EQ(a.mrtd(), mrtd);
  ASSERT_EQ(a.rtmr_size(), 4);
  EXPECT_EQ(a.rtmr(3).substr(0, 4), "0303");
  EXPECT_EQ(a.tee_tcb_svn(), "07070707070707070707070707070707");
  EXPECT_EQ(a.tcb_status(), "OutOfDate");
  ASSERT_EQ(a.advisory_ids_size(), 2);
  EXPECT_EQ(a.collateral_next_update_unix(), 1751328000);
  EXPECT_EQ(a.verified_unix_ms(), 1234);
}

TEST(AttestationRecordTest, TheSameTdAtAnotherTimeIsTheSame) {
  EXPECT_TRUE(SameAttestation(RecordOf(Peer(), 1), RecordOf(Peer(), 2)));
  AttestedIdentity other = Peer();
  other.rtmr[3][0] = 9;
  EXPECT_FALSE(SameAttestation(RecordOf(Peer(), 1), RecordOf(other, 1)));
  AttestedIdentity patched = Peer();
  patched.tcb_status = "UpToDate";
  EXPECT_FALSE(SameAttestation(RecordOf(Peer(), 1), RecordOf(patched, 1)));
}

TEST(AttestationRecordTest, DescribesMeasurementsAndTcb) {
  const std::string d = DescribeAttestation(RecordOf(Peer(), 1));
  EXPECT_NE(d.find("tdx mrtd abab"), std::string::npos) << d;
  EXPECT_NE(d.find(" rtmr3 0303"), std::string::npos) << d;
  EXPECT_NE(d.find("TCB OutOfDate (advisories INTEL-SA-00837, INTEL-SA-00960), collateral "
                   "issued 2025-06-01, next update 2025-07-01"),
            std::string::npos)
      << d;
  AttestedIdentity dev = Peer();
  dev.format = "dev";
  dev.tcb_status.clear();
  EXPECT_EQ(DescribeAttestation(RecordOf(dev, 1)).find("TCB"), std::string::npos);
}

}  // namespace
}  // namespace gputravel
