#include "cli/campaign_view.h"

#include <string>

#include "gtest/gtest.h"

namespace gputravel::cli {
namespace {

TEST(CampaignViewTest, AttestationTableShowsEachAttestedHolder) {
  google::protobuf::RepeatedPtrField<v1::HolderStatus> hs;
  v1::HolderStatus* a = hs.Add();
  a->set_name("hospital-a");
  v1::VerifiedAttestation* at = a->mutable_attestation();
  at->set_format("tdx-quote-v4");
  at->set_mrtd(std::string(96, 'a'));
  for (char c : {'0', '1', '2', '3'}) at->add_rtmr(std::string(96, c));
  at->set_tcb_status("OutOfDate");
  at->add_advisory_ids("INTEL-SA-00837");
  at->set_verified_unix_ms(1735732800000);  // 2025-01-01T12:00:00Z
  hs.Add()->set_name("hospital-b");         // not attested yet: no row
  const std::string t = AttestationTable(hs);
  EXPECT_NE(t.find("HOLDER"), std::string::npos) << t;
  EXPECT_NE(t.find("hospital-a  tdx-quote-v4  OutOfDate INTEL-SA-00837  2025-01-01T12:00:00Z  " +
                   std::string(96, 'a') + "  " + std::string(96, '3')),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("hospital-b"), std::string::npos) << t;
}

TEST(CampaignViewTest, NoAttestationTableBeforeAnyTrip) {
  google::protobuf::RepeatedPtrField<v1::HolderStatus> hs;
  hs.Add()->set_name("hospital-a");
  EXPECT_EQ(AttestationTable(hs), "");
}

TEST(CampaignViewTest, AHolderDoneWithEveryRoundShowsItsWholeDataset) {
  google::protobuf::RepeatedPtrField<v1::HolderStatus> hs;
  v1::HolderStatus* done = hs.Add();
  done->set_name("hospital-a");
  done->set_state("done");
  done->set_round(2);
  done->set_dataset_bytes(3u << 20);
  v1::HolderStatus* active = hs.Add();
  active->set_name("hospital-b");
  active->set_state("active");
  active->set_cursor_offset(1u << 20);
  active->set_dataset_bytes(4u << 20);
  const std::string t = HoldersTable(hs, false);
  EXPECT_NE(t.find("all of 3.0 MiB"), std::string::npos) << t;
  EXPECT_NE(t.find("1.0 MiB of 4.0 MiB"), std::string::npos) << t;
}

// DIGEST says NO only for a digest that was checked and did not match: a
// trip that ended before the holder's report had none checked.
TEST(CampaignViewTest, ADigestNeverCheckedIsNotShownAsAMismatch) {
  v1::Campaign c;
  v1::Trip* ok = c.add_trips();
  ok->set_id(1);
  ok->set_outcome("ok");
  ok->set_bytes(1u << 20);
  ok->set_chunks(4);
  ok->set_digest_match(true);
  v1::Trip* mismatch = c.add_trips();
  mismatch->set_id(2);
  mismatch->set_outcome("failed");
  mismatch->set_bytes(1u << 20);
  mismatch->set_chunks(4);
  mismatch->set_error("digest mismatch");
  v1::Trip* never = c.add_trips();
  never->set_id(3);
  never->set_outcome("aborted");
  never->set_scrub_verified(true);
  never->set_rekeyed(true);
  never->set_error("holder h OpenChannel: unreachable");
  const std::string t = TripsTable(c);
  auto row = [&](int id) {
    const size_t at = t.find("\n " + std::to_string(id) + "  ");
    EXPECT_NE(at, std::string::npos) << t;
    return t.substr(at + 1, t.find('\n', at + 1) - at - 1);
  };
  auto digest_column = [&](const std::string& r) {
    const size_t col = t.find("DIGEST");
    return r.substr(col, r.find(' ', col) - col);
  };
  EXPECT_EQ(digest_column(row(1)), "yes") << t;
  EXPECT_EQ(digest_column(row(2)), "NO") << t;
  EXPECT_EQ(digest_column(row(3)), "-") << t;
}

TEST(CampaignViewTest, WaitingForTheGpuNamesWhoHoldsIt) {
  v1::Campaign c;
  c.set_state(v1::RUNNING);
  EXPECT_EQ(WaitingText(c), "");
  c.set_waiting_for_gpu(true);
  EXPECT_EQ(WaitingText(c), " (waiting for its GPU)");
  c.set_gpu_holder("alpha");
  EXPECT_EQ(WaitingText(c), " (waiting for its GPU, held by campaign alpha)");
  EXPECT_NE(CampaignSummary(c).find("RUNNING (waiting for its GPU, held by campaign alpha)"),
            std::string::npos)
      << CampaignSummary(c);
}

}  // namespace
}  // namespace gputravel::cli
