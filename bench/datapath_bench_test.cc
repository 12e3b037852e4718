// The benchmark's measuring functions on tiny sizes: they must run, agree
// with the real writer and produce sane numbers. Timings are never asserted.
#include <algorithm>
#include <cmath>

#include "bench/datapath_runner.h"
#include "bench/device_rig.h"
#include "bench/gcm_reference.h"
#include "bench/plaintext_source.h"
#include "bench/provision_bench.h"
#include "bench/report.h"
#include "bench/slot_freeing_device.h"
#include "bench/stage_bench.h"
#include "bench/stats.h"
#include "bench/trip_bench.h"
#include "device/h2d_writer.h"
#include "device/window_digest.h"
#include "gtest/gtest.h"
#include "keyxfer/random.h"
#include "nlohmann/json.hpp"

namespace gputravel {
namespace bench {
namespace {

ChannelMaterial TestKey() {
  ChannelMaterial key;
  key.key = SecretBytes::FromString(RandomString(32));
  RandomBytes(key.iv_mask.data(), key.iv_mask.size());
  key.channel_counter = 7;
  return key;
}

TEST(StatsTest, NearestRankPercentiles) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  Summary s = Summarize(v);
  EXPECT_EQ(s.n, 100u);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.p50, 50);
  EXPECT_EQ(s.p99, 99);
  EXPECT_EQ(s.max, 100);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_EQ(Summarize({}).n, 0u);
  EXPECT_EQ(Summarize({3.0}).p99, 3.0);
}

TEST(GcmReferenceTest, ProducesAFigure) {
  auto r = MeasureGcmReference(16 << 10, 0.01);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->messages, 0u);
  EXPECT_GT(r->mbps, 0);
  EXPECT_TRUE(std::isfinite(r->mbps));
  EXPECT_FALSE(MeasureGcmReference(0, 0.01).ok());
}

// Both sides with OpenSSL alone: every byte of the window goes through a
// ring and back (the function compares the destination with the source),
// split among the pairs; bad geometry is refused.
TEST(GcmReferenceTest, BothSidesMovesTheWindowThroughEveryPair) {
  const std::string dir = ::testing::TempDir();
  auto r = MeasureGcmBothSides(64 << 10, 1 << 20, 2, 3, dir);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->pairs, 3);
  EXPECT_EQ(r->messages, 16u);
  EXPECT_GT(r->mbps, 0);
  EXPECT_TRUE(std::isfinite(r->mbps));
  // More pairs than messages: one message each.
  r = MeasureGcmBothSides(64 << 10, 128 << 10, 4, 8, dir);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->pairs, 2);
  EXPECT_FALSE(MeasureGcmBothSides(64 << 10, 32 << 10, 4, 1, dir).ok()) << "no whole message";
  EXPECT_FALSE(MeasureGcmBothSides(64 << 10, 1 << 20, 0, 1, dir).ok()) << "no slot";
  EXPECT_FALSE(MeasureGcmBothSides(64 << 10, 1 << 20, 4, 0, dir).ok()) << "no pair";
  EXPECT_FALSE(MeasureGcmBothSides(100, 1 << 20, 4, 1, dir).ok()) << "not a slot size";
  EXPECT_FALSE(MeasureGcmBothSides(64 << 10, 1 << 20, 4, 1, dir + "/missing").ok());
}

// (a) measures the real writer: every chunk reaches the stand-in, with the
// writer's counters, AAD and tag order (its digest is WindowDigest's).
TEST(StageBenchTest, TheWriterAgainstTheStandInGivesSaneNumbers) {
  const uint64_t kLength = (1u << 20) + 4096;  // last chunk short
  PlaintextSource source(kLength);
  ChannelMaterial key = TestKey();
  auto device = SlotFreeingDevice::Start();
  ASSERT_NE(device, nullptr);
  auto expected = WindowDigest(key, 3, 9, 0, source.Prefix(kLength), 64 << 10, 5);
  ASSERT_TRUE(expected.ok());
  for (int threads : {1, 2}) {
    for (bool views : {true, false}) {
      H2dWriterOptions o;
      o.chunk_size = 64 << 10;
      o.threads = threads;
      auto r = views ? RunEncryptAndStage(*device, key, 3, 9, kLength, 5, source, o)
                     : RunEncryptAndStage(*device, key, 3, 9, kLength, 5,
                                          source.AsChunkSource(), o);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->bytes, kLength);
      EXPECT_EQ(r->chunks, 17u);
      EXPECT_GT(r->mbps, 0);
      EXPECT_TRUE(std::isfinite(r->mbps));
      EXPECT_EQ(r->zero_copy, views);
      EXPECT_EQ(r->digest, *expected) << threads << " thread(s)";
    }
  }
  // A one-chunk window takes the unary doorbell.
  H2dWriterOptions one;
  one.chunk_size = 64 << 10;
  auto r = RunEncryptAndStage(*device, key, 3, 9, 4096, 5, source, one);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->chunks, 1u);
  EXPECT_EQ(r->digest, *WindowDigest(key, 3, 9, 0, source.Prefix(4096), 64 << 10, 5));
}

TEST(ProvisionBenchTest, WindowLandsOnTheDevice) {
  auto rig = DeviceRig::Start(8u << 20);
  ASSERT_TRUE(rig.ok()) << rig.status();
  const uint64_t kLength = 3u << 20;
  auto buffer = (*rig)->session().AllocBuffer(kLength);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  PlaintextSource source(kLength);
  H2dWriterOptions wo;
  wo.chunk_size = 256 << 10;
  wo.threads = 2;
  for (int pass = 0; pass < 2; ++pass) {  // a second pass re-keys and works too
    auto r = MeasureProvision(**rig, *buffer, kLength, source.AsChunkSource(), wo);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->bytes, kLength);
    EXPECT_EQ(r->chunks, 12u);
    EXPECT_GT(r->mbps, 0);
  }
  std::string back = *(*rig)->session().Read(*buffer, 0, kLength);
  EXPECT_TRUE(back == source.Prefix(kLength));
}

TEST(DatapathRunnerTest, TinyRunGivesFiniteRatiosAndValidJson) {
  BenchConfig c = BenchConfig::Quick();
  c.reference_seconds = 0.01;
  c.chunk_sizes = {64u << 10, 256u << 10};
  c.stage_window = 1u << 20;
  c.stage_passes = 2;
  c.device_window = 1u << 20;
  c.device_passes = 1;
  c.provision_window = 2u << 20;
  c.provision_chunk = 1u << 20;
  c.provision_passes = 1;
  c.source_bytes = 1u << 20;
  c.component_iterations = 2;
  c.run_trips = false;
  auto r = RunDatapathBench(c, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  // In place at 16 KiB, 64 KiB, 256 KiB, 1 MiB; into the ring at the last
  // three, from staging and from a source-sized buffer.
  EXPECT_EQ(r->reference.size(), 10u);
  ASSERT_EQ(r->stage.size(), 4u);
  ASSERT_EQ(r->stage_device.size(), 4u);
  for (const auto* figs : {&r->stage, &r->stage_device}) {
    for (const auto& f : *figs) {
      EXPECT_GT(f.mbps, 0);
      EXPECT_GT(f.reference_mbps, 0);
      EXPECT_GT(f.ring_reference_mbps, 0);
      EXPECT_GT(f.large_source_reference_mbps, 0);
      EXPECT_GT(f.ring_create_seconds, 0);
      EXPECT_TRUE(std::isfinite(f.ratio) && f.ratio > 0);
    }
  }
  for (const auto& f : r->stage) {
    // The multi-thread rows carry what OpenSSL got on as many threads at once.
    if (f.threads > 1) {
      EXPECT_EQ(f.pass_concurrent_reference_mbps.size(), f.pass_mbps.size());
      EXPECT_TRUE(std::isfinite(f.ratio_concurrent) && f.ratio_concurrent > 0);
    } else {
      EXPECT_TRUE(f.pass_concurrent_reference_mbps.empty());
    }
  }
  // The dataset-file rows went through the agent's own source, mapping the
  // file's chunks (zero copy), at the smallest and largest chunk size.
  EXPECT_TRUE(r->stage_from_file_note.empty()) << r->stage_from_file_note;
  EXPECT_TRUE(r->stage_from_file_mapped);
  ASSERT_EQ(r->stage_from_file.size(), 4u);
  for (const auto& f : r->stage_from_file) {
    EXPECT_GT(f.mbps, 0);
    EXPECT_TRUE(f.zero_copy);
    EXPECT_TRUE(std::isfinite(f.ratio) && f.ratio > 0);
  }
  ASSERT_EQ(r->device_ceiling.size(), 2u);
  for (const auto& c : r->device_ceiling) {
    EXPECT_EQ(c.bytes, 1u << 20);
    EXPECT_GT(c.mbps, 0);
  }
  EXPECT_GT(r->provision.mbps, 0);
  EXPECT_TRUE(std::isfinite(r->provision.ratio_single) && r->provision.ratio_single > 0);
  // (b') carries, per pass, what OpenSSL alone gets doing both sides, and
  // that as a share of the limit.
  ASSERT_EQ(r->provision_engines.size(), 4u);
  for (const auto& e : r->provision_engines) {
    const ThroughputFigure& f = e.figure;
    EXPECT_GT(f.mbps, 0) << e.copy_engines;
    EXPECT_EQ(f.pass_both_sides_mbps.size(), f.pass_mbps.size()) << e.copy_engines;
    EXPECT_GT(f.both_sides_mbps, 0) << e.copy_engines;
    EXPECT_TRUE(std::isfinite(f.ratio_both_sides) && f.ratio_both_sides > 0);
    EXPECT_TRUE(std::isfinite(e.both_sides_ratio_limit) && e.both_sides_ratio_limit > 0);
    EXPECT_TRUE(std::isfinite(e.ratio_limit) && e.ratio_limit > 0);
  }
  EXPECT_GE(r->components.size(), 10u);
  for (const auto& comp : r->components) {
    EXPECT_EQ(comp.seconds.n, 2u) << comp.name;
    EXPECT_GT(comp.seconds.p50, 0) << comp.name;
  }
  EXPECT_FALSE(r->ran_trips);
  EXPECT_TRUE(r->trips_error.empty());
  EXPECT_FALSE(TripTargetMet(*r).has_value()) << "no verdict on trips that did not run";
  auto j = nlohmann::json::parse(ReportJson(*r), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_GT(j["machine"]["nproc"].get<int>(), 0);
  EXPECT_EQ(j["encrypt_and_stage"]["figures"].size(), 4u);
  // Verdicts rest on the lower of the two ratios, and say so; (a') has no
  // target.
  auto verdict_of = [](const nlohmann::json& f) {
    const double v = std::min(f["ratio_vs_threads_x_openssl"].get<double>(),
                              f["ratio_vs_threads_x_adjacent_openssl"].get<double>());
    EXPECT_DOUBLE_EQ(f["verdict_ratio"].get<double>(), v);
    EXPECT_TRUE(f["verdict_basis"].is_string());
    return v >= 0.9;
  };
  for (const auto& f : j["encrypt_and_stage"]["figures"]) {
    EXPECT_EQ(f["meets_target"].get<bool>(), verdict_of(f));
  }
  for (const auto& f : j["encrypt_and_stage_with_device"]["figures"]) {
    EXPECT_TRUE(f["meets_target"].is_null());
  }
  EXPECT_EQ(j["encrypt_and_stage_from_dataset_file"]["figures"].size(), 4u);
  for (const auto& f : j["encrypt_and_stage_from_dataset_file"]["figures"]) {
    EXPECT_TRUE(f["meets_target"].is_null());
  }
  EXPECT_EQ(j["provision_end_to_end"]["meets_target"].get<bool>(),
            verdict_of(j["provision_end_to_end"]));
  ASSERT_EQ(j["provision_copy_engines"]["figures"].size(), 4u);
  for (const auto& f : j["provision_copy_engines"]["figures"]) {
    EXPECT_GT(f["openssl_both_sides_mbps_median"].get<double>(), 0);
    EXPECT_GT(f["ratio_vs_openssl_both_sides"].get<double>(), 0);
    EXPECT_GT(f["openssl_both_sides_ratio_to_limit"].get<double>(), 0);
    EXPECT_EQ(f["pass_openssl_both_sides_mbps"].size(), f["pass_mbps"].size());
  }
  EXPECT_DOUBLE_EQ(j["targets"]["stage_ratio_min"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(j["targets"]["trip_p50_max_seconds"].get<double>(), 0.005);
  EXPECT_FALSE(j["openssl_reference"].empty());
  EXPECT_TRUE(j["command_line"].is_string());
  EXPECT_TRUE(j["sections_run"]["provision_end_to_end"].get<bool>());
  EXPECT_FALSE(j["sections_run"]["trip_control_plane"].get<bool>());
  // Trips that did not run have no figures that could pass for zeros.
  EXPECT_FALSE(j["trip_control_plane"].contains("trip_seconds"));
  EXPECT_TRUE(j["trip_control_plane"]["p50_meets_target"].is_null());
  EXPECT_EQ(j["trip_control_plane"]["components_in_process"].size(), r->components.size());
  const std::string table = ReportTable(*r);
  EXPECT_NE(table.find("not run (--skip_trips)"), std::string::npos) << table;
  EXPECT_EQ(table.find("NOT MEASURED"), std::string::npos) << table;
}

TEST(DatapathRunnerTest, SectionsLeftOutAreSaidSoAndNotZeros) {
  BenchReport r;
  r.ran_datapath = false;
  r.trips.trips = 20;
  r.trips.trip_seconds.n = 20;
  r.trips.trip_seconds.p50 = 0.001;
  // Fewer trips than a figure needs: no verdict, even on a fast p50.
  EXPECT_FALSE(TripTargetMet(r).has_value());
  const std::string table = ReportTable(r);
  EXPECT_NE(table.find("(a), (a') and (b): not run (--trips_only)"), std::string::npos) << table;
  EXPECT_EQ(table.find("(b) end-to-end"), std::string::npos) << table;
  EXPECT_NE(table.find("no verdict (20 trips measured; figures need 100)"), std::string::npos)
      << table;
  auto j = nlohmann::json::parse(ReportJson(r), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_TRUE(j["encrypt_and_stage"].is_null());
  EXPECT_TRUE(j["encrypt_and_stage_from_dataset_file"].is_null());
  EXPECT_TRUE(j["encrypt_and_stage_with_device"].is_null());
  EXPECT_TRUE(j["provision_end_to_end"].is_null());
  EXPECT_FALSE(j["sections_run"]["encrypt_and_stage"].get<bool>());
  EXPECT_TRUE(j["sections_run"]["trip_control_plane"].get<bool>());
  EXPECT_TRUE(j["trip_control_plane"]["p50_meets_target"].is_null());
  r.trips.trips = 100;
  r.trips.trip_seconds.n = 100;
  ASSERT_TRUE(TripTargetMet(r).has_value());
  EXPECT_TRUE(*TripTargetMet(r));
  r.trips.trip_seconds.p50 = 0.006;
  EXPECT_FALSE(*TripTargetMet(r));
  r.trips_error = "stack did not start";
  EXPECT_FALSE(TripTargetMet(r).has_value());
  EXPECT_NE(ReportTable(r).find("NOT MEASURED: stack did not start"), std::string::npos);
}

TEST(TripBenchTest, FewTripsOverTheRealStack) {
  TripBenchOptions o;
  o.rounds = 3;
  o.route_samples = 2;
  auto r = MeasureTrips(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->trips, 3u);
  EXPECT_EQ(r->failed_trips, 0u);
  EXPECT_EQ(r->trip_seconds.n, 3u);
  EXPECT_GT(r->trip_seconds.p50, 0);
  EXPECT_GT(r->holder_seconds.p50, 0);
  EXPECT_LT(r->holder_seconds.p50, r->trip_seconds.max);
  EXPECT_EQ(r->phase_trips, 3u);
  EXPECT_GT(r->away_mean, 0);
  EXPECT_EQ(r->mux_route_seconds.n, 2u);
  // Every trip released its ring in the device, and each daemon's CPU was
  // read.
  ASSERT_TRUE(r->device_maps_readable)
      << "the device's /proc/PID/maps could not be read (CAP_SYS_PTRACE needed)";
  EXPECT_EQ(r->device_bounce_mappings, 0u);
  EXPECT_EQ(r->device_bounce_bytes, 0u);
  EXPECT_FALSE(r->transport.empty());
  // (Read in 10 ms clock ticks: a daemon may show 0 over three trips.)
  for (const char* daemon : {"gpu", "mux", "orchestrator"}) {
    ASSERT_TRUE(r->cpu_seconds_per_trip.count(daemon)) << daemon;
    EXPECT_GE(r->cpu_seconds_per_trip.at(daemon), 0) << daemon;
  }
}

}  // namespace
}  // namespace bench
}  // namespace gputravel
