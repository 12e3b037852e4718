#include "orchestrator/campaign_runner.h"

#include <fstream>
#include <map>
#include <memory>

#include "device/gpu_session.h"
#include "keyxfer/counter_window.h"
#include "keyxfer/x509.h"
#include "orchestrator/trip_runner.h"
#include "proto/holder.grpc.pb.h"
#include "proto/mux.grpc.pb.h"
#include "util/files.h"
#include "util/grpc_status.h"
#include "util/log.h"

namespace gputravel {

absl::StatusOr<uint64_t> CampaignRunner::NextTripId() {
  const std::string path = config_->state_dir + "/trip_counter";
  uint64_t last = 0;
  std::ifstream in(path);
  if (in && !(in >> last)) {
    return absl::DataLossError(path + " is corrupt; refusing to reuse trip ids");
  }
  absl::Status s = WriteFileAtomically(path, std::to_string(last + 1) + "\n");
  if (!s.ok()) return s;
  return last + 1;
}

v1::CampaignReport CampaignRunner::Run(const std::string& name) {
  absl::MutexLock l(&mu_);
  v1::CampaignReport report;
  report.set_campaign(name);
  auto fail = [&report](const std::string& msg) {
    report.set_ok(false);
    report.set_error(msg);
    GT_LOG(0, "campaign ", report.campaign(), ": ", msg);
    return report;
  };
  const CampaignConfig* campaign = nullptr;
  for (const auto& c : config_->campaigns) {
    if (c.name == name) campaign = &c;
  }
  if (campaign == nullptr) return fail("unknown campaign '" + name + "'");

  // Holders: reachable, and what they hold.
  std::map<std::string, std::unique_ptr<v1::HolderAgent::Stub>> stubs;
  std::map<std::string, uint64_t> sizes;
  for (const auto& h : campaign->holders) {
    stubs[h.name] = v1::HolderAgent::NewStub(MakeChannel(h.endpoint));
    v1::HolderInfo info;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    absl::Status s = FromGrpc(stubs[h.name]->GetInfo(&ctx, {}, &info),
                              "holder " + h.name + " at " + h.endpoint);
    if (!s.ok()) return fail(std::string(s.message()));
    if (info.name() != h.name) {
      return fail("holder at " + h.endpoint + " calls itself '" + info.name() +
                  "', the campaign expects '" + h.name + "'");
    }
    sizes[h.name] = info.dataset_bytes();
  }

  auto mux = v1::Mux::NewStub(MakeChannel(config_->mux_endpoint));
  auto ca_pem = ReadFile(config_->gpu.device_ca);
  if (!ca_pem.ok()) return fail(std::string(ca_pem.status().message()));
  auto ca_der = CertificatePemToDer(*ca_pem);
  if (!ca_der.ok()) return fail(config_->gpu.device_ca + ": " + std::string(ca_der.status().message()));
  GpuSession gpu(MakeChannel(config_->gpu.device_endpoint), *ca_der, config_->gpu.serial);
  TripRunner runner(config_->domain, config_->gpu.name, mux.get(), &gpu, attester_,
                    verifier_, config_->state_dir);

  auto home_token = NextTripId();
  if (!home_token.ok()) return fail(std::string(home_token.status().message()));
  absl::Status s = runner.RouteHome(*home_token);
  if (!s.ok()) return fail(std::string(s.message()));
  s = gpu.Establish();
  if (!s.ok()) return fail(std::string(s.message()));
  GT_LOG(1, "campaign ", name, ": CC session ", gpu.session_id(), " with GPU ", gpu.serial());
  auto buffer = gpu.AllocBuffer(campaign->buffer_bytes);
  if (!buffer.ok()) return fail(std::string(buffer.status().message()));

  // Plan: round-robin over holders, each advancing through its dataset in
  // buffer-sized windows; `rounds` passes over every dataset.
  struct Cursor { uint64_t offset = 0; uint32_t round = 0; };
  std::map<std::string, Cursor> cursors;
  bool progress = true;
  bool ok = true;
  while (progress) {
    progress = false;
    for (const auto& h : campaign->holders) {
      Cursor& c = cursors[h.name];
      if (c.round >= campaign->rounds || sizes[h.name] == 0) continue;
      progress = true;
      TripPlan plan;
      plan.campaign = name;
      auto trip = NextTripId();
      if (!trip.ok()) return fail(std::string(trip.status().message()));
      plan.trip = *trip;
      plan.holder = &h;
      plan.window_offset = c.offset;
      plan.window_length = std::min<uint64_t>(campaign->buffer_bytes, sizes[h.name] - c.offset);
      plan.buffer_id = *buffer;
      plan.buffer_bytes = campaign->buffer_bytes;
      plan.chunk_bytes = campaign->chunk_bytes;
      plan.timeout_seconds = campaign->trip_timeout_seconds;
      auto tr = runner.Run(plan, stubs[h.name].get());
      if (!tr.ok()) {
        return fail("trip " + std::to_string(plan.trip) + " could not be made safe: " +
                    std::string(tr.status().message()));
      }
      GT_LOG(1, "trip ", tr->trip(), " ", h.name, ": ", tr->bytes(), " bytes, digest ",
             tr->digest_match() ? "match" : "MISMATCH", ", scrub ",
             tr->scrub_verified() ? "verified" : "NOT verified", ", re-keyed ",
             tr->rekeyed() ? "yes" : "no",
             tr->error().empty() ? "" : ", error: " + tr->error());
      bool trip_ok = tr->error().empty() && tr->digest_match() && tr->scrub_verified() &&
                     tr->rekeyed();
      ok = ok && trip_ok;
      *report.add_trips() = *tr;
      c.offset += plan.window_length;
      if (c.offset >= sizes[h.name]) {
        c.offset = 0;
        ++c.round;
      }
      if (!trip_ok) {
        // A failed holder is skipped for the rest of this campaign.
        c.round = campaign->rounds;
      }
    }
  }
  s = gpu.FreeBuffer(*buffer);
  if (!s.ok()) GT_LOG(0, "freeing the dataset buffer: ", s.message());
  report.set_ok(ok);
  if (!ok && report.error().empty()) report.set_error("one or more trips failed");
  return report;
}

}  // namespace gputravel
