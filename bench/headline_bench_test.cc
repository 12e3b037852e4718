// A small run of //bench:headline_bench (three caps, 2 and 4 MiB windows,
// two trips): both tables' structure (the seed's training time and the
// built-in trainer's, measured), every window verified on the device,
// and each shaped baseline no faster than the link allows (bytes x 8 /
// rate), so a traffic-control set-up that does not shape fails here. No
// timing assertion on travelling. Needs root (CI runs as root): where the
// namespaces or tc cannot be set up the test fails with the reason.
#include <cstdlib>
#include <string>

#include "bench/netns_link.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gputravel {
namespace bench {
namespace {

using json = nlohmann::json;

TEST(HeadlineBenchTest, SmallRunHasTheTableAndRespectsTheLink) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  ASSERT_NE(srcdir, nullptr);
  const std::string binary = std::string(srcdir) + "/gputravel/bench/headline_bench";
  std::string out;
  absl::Status s = RunCommand({binary, "--json", "--caps=20M,100M,500M",
                               "--sizes_kib=2048,4096", "--table_size=4096",
                               "--travel_sizes=4096", "--travel_rounds=2",
                               "--max_measure_seconds=60"},
                              &out);
  ASSERT_TRUE(s.ok()) << "the headline benchmark failed (it needs root, iproute2's ip and "
                         "tc, veth and network namespaces): "
                      << s.message();
  json j = json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j.at("table_bytes").get<uint64_t>(), 4u << 20);

  const json& caps = j.at("baseline");
  ASSERT_EQ(caps.size(), 3u);
  for (const json& c : caps) {
    SCOPED_TRACE(c.at("label").get<std::string>());
    const double rate = c.at("rate_bits_per_second").get<double>();
    ASSERT_GT(rate, 0);
    ASSERT_EQ(c.at("measured").size(), 2u);
    uint64_t bytes = 0;
    for (const json& m : c.at("measured")) {
      const double b = m.at("bytes").get<double>();
      bytes += m.at("bytes").get<uint64_t>();
      EXPECT_TRUE(m.at("verified").get<bool>());
      // The link's physical time: the shaping must have held.
      EXPECT_GE(m.at("network_seconds").get<double>(), b * 8 / rate);
      EXPECT_GE(m.at("total_seconds").get<double>(),
                m.at("network_seconds").get<double>() + m.at("load_seconds").get<double>());
      EXPECT_GT(m.at("load_seconds").get<double>(), 0);
      EXPECT_GT(m.at("verify_seconds").get<double>(), 0);
    }
    EXPECT_TRUE(c.at("above_floor").get<bool>());
    // Every byte of the windows went through the tbf qdisc.
    EXPECT_GE(c.at("qdisc_bytes").get<uint64_t>(), bytes);
    ASSERT_EQ(c.at("sizes").size(), 2u);
    for (const json& sz : c.at("sizes")) EXPECT_FALSE(sz.at("extrapolated").get<bool>());
  }

  const json& rows = j.at("table");
  ASSERT_EQ(rows.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rows[i].at("design"), "network");
    const double t = rows[i].at("transmission_seconds").get<double>();
    const double share = rows[i].at("transmission_share").get<double>();
    EXPECT_GT(t, 0);
    EXPECT_NEAR(share, t / (1230 + t), 1e-9);
  }
  // The seed's figures beside ours where the seed has the cap.
  EXPECT_EQ(rows[0].at("seed_seconds").get<double>(), 230.84);
  EXPECT_EQ(rows[1].at("seed_seconds").get<double>(), 60.36);
  EXPECT_EQ(rows[2].at("seed_seconds").get<double>(), 15.86);
  EXPECT_EQ(rows[3].at("design"), "travelling");
  EXPECT_GT(rows[3].at("transmission_seconds").get<double>(), 0);

  // The same rows per training run of the built-in trainer's measured time
  // on the same window.
  const json& trained = j.at("training_measured");
  ASSERT_TRUE(trained.is_object());
  EXPECT_EQ(trained.at("trainer").at("kind"), "next-token");
  EXPECT_EQ(trained.at("window_bytes").get<uint64_t>(), 4u << 20);
  // Half the table's window and the table's, the latter in the table.
  ASSERT_EQ(trained.at("sizes").size(), 2u);
  EXPECT_EQ(trained.at("sizes")[0].at("bytes").get<uint64_t>(), 2u << 20);
  EXPECT_GT(trained.at("linearity").get<double>(), 0);
  const json& at_table = trained.at("sizes")[1];
  EXPECT_EQ(at_table.at("bytes").get<uint64_t>(), 4u << 20);
  EXPECT_EQ(at_table.at("tokens").get<uint64_t>(), 2u << 20);
  EXPECT_EQ(at_table.at("batches").get<uint64_t>(), (2u << 20) / 65536);
  // It learned: below an untrained model's ln(512) = 6.24 nats.
  EXPECT_LT(at_table.at("mean_loss").get<double>(), 6.0);
  const double training = trained.at("seconds").get<double>();
  EXPECT_GT(training, 0);
  EXPECT_EQ(training, at_table.at("seconds").get<double>());
  const json& measured_rows = j.at("table_measured_training");
  ASSERT_EQ(measured_rows.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(measured_rows[i].at("design"), rows[i].at("design"));
    EXPECT_EQ(measured_rows[i].at("cap"), rows[i].at("cap"));
    EXPECT_EQ(measured_rows[i].at("training_seconds").get<double>(), training);
    const double t = measured_rows[i].at("transmission_seconds").get<double>();
    EXPECT_EQ(t, rows[i].at("transmission_seconds").get<double>());
    EXPECT_NEAR(measured_rows[i].at("transmission_share").get<double>(), t / (training + t),
                1e-9);
    EXPECT_FALSE(measured_rows[i].contains("seed_seconds"));
  }

  const json& travel = j.at("travelling");
  ASSERT_EQ(travel.size(), 1u);
  EXPECT_EQ(travel[0].at("trips").get<uint64_t>(), 2u);
  for (const char* part : {"routing_seconds", "provisioning_seconds", "rekey_seconds",
                           "scrub_seconds", "trip_seconds"}) {
    EXPECT_GT(travel[0].at(part).get<double>(), 0) << part;
  }
  const json& p = j.at("provisioning");
  ASSERT_TRUE(p.is_object());
  EXPECT_GT(p.at("machine_limit_mbps").get<double>(), 0);
  EXPECT_GT(p.at("ratio_to_machine_limit").get<double>(), 0);
}

}  // namespace
}  // namespace bench
}  // namespace gputravel
