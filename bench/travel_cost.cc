#include "bench/travel_cost.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "bench/device_rig.h"
#include "bench/stats.h"
#include "bench/trip_bench.h"

namespace gputravel {
namespace bench {

nlohmann::json ToJson(const TravelCost& c) {
  return {{"bytes", c.bytes},
          {"trips", c.trips},
          {"trip_seconds", c.trip_seconds},
          {"routing_seconds", c.routing_seconds},
          {"handoff_seconds", c.handoff_seconds},
          {"provisioning_seconds", c.provisioning_seconds},
          {"return_seconds", c.return_seconds},
          {"rekey_seconds", c.rekey_seconds},
          {"scrub_seconds", c.scrub_seconds},
          {"readback_and_rest_seconds", c.readback_and_rest_seconds},
          {"provision_mbps", c.provision_mbps}};
}

absl::StatusOr<TravelCost> MeasureTravel(uint64_t window_bytes, uint32_t rounds,
                                         const std::string& bin_dir) {
  TripBenchOptions o;
  o.rounds = rounds;
  o.window_bytes = window_bytes;
  o.chunk_bytes = static_cast<uint32_t>(std::min<uint64_t>(window_bytes, 2u << 20));
  o.gpu_memory_bytes = std::max<uint64_t>(256u << 20, 2 * window_bytes + (64u << 20));
  o.route_samples = 20;
  o.bin_dir = bin_dir;
  o.tcp_loopback = true;
  auto trips = MeasureTrips(o);
  if (!trips.ok()) return trips.status();
  if (trips->failed_trips != 0 || trips->trip_seconds.n == 0) {
    return absl::InternalError(std::to_string(trips->failed_trips) + " of " +
                               std::to_string(trips->trips) + " trips of " +
                               std::to_string(window_bytes) + " bytes failed");
  }
  TravelCost c;
  c.bytes = window_bytes;
  c.trips = trips->trip_seconds.n;
  c.trip_seconds = trips->trip_seconds.p50;
  const double route = trips->mux_route_seconds.p50;
  c.routing_seconds = 2 * route;
  c.handoff_seconds = std::max(0.0, trips->setup_mean - route);
  c.provisioning_seconds = trips->holder_seconds.p50;
  c.return_seconds = trips->return_mean;
  c.provision_mbps = MegabytesPerSecond(window_bytes, c.provisioning_seconds);

  // The return phase's parts at this size, in process.
  auto rig = DeviceRig::Start(window_bytes + (64u << 20));
  if (!rig.ok()) return rig.status();
  auto buffer = (*rig)->session().AllocBuffer(window_bytes);
  if (!buffer.ok()) return buffer.status();
  std::vector<double> rekey;
  for (int i = 0; i < 5; ++i) {
    // As between trips, the session's next ephemeral key is made ahead.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto t0 = std::chrono::steady_clock::now();
    absl::Status s = (*rig)->session().Establish();
    rekey.push_back(SecondsSince(t0));
    if (!s.ok()) return s;
  }
  c.rekey_seconds = Summarize(rekey).p50;
  auto t0 = std::chrono::steady_clock::now();
  absl::Status s = (*rig)->session().ScrubAndVerify(*buffer, window_bytes);
  c.scrub_seconds = SecondsSince(t0);
  if (!s.ok()) return s;
  c.readback_and_rest_seconds =
      std::max(0.0, c.trip_seconds - c.routing_seconds - c.handoff_seconds -
                        c.provisioning_seconds - c.rekey_seconds - c.scrub_seconds);
  return c;
}

}  // namespace bench
}  // namespace gputravel
