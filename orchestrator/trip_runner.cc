#include "orchestrator/trip_runner.h"

#include <unistd.h>

#include <chrono>

#include "device/h2d_writer.h"
#include "keyxfer/attested_channel.h"
#include "keyxfer/counter_window.h"
#include "keyxfer/handoff.h"
#include "util/grpc_status.h"
#include "util/log.h"

namespace gputravel {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::chrono::system_clock::time_point Deadline(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace

absl::Status TripRunner::RouteTo(const std::string& domain, uint64_t token) {
  v1::RouteRequest req;
  req.set_gpu(gpu_name_);
  req.set_domain(domain);
  req.set_fencing_token(token);
  v1::RouteResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(30));
  return FromGrpc(mux_->Route(&ctx, req, &resp),
                  "MUX Route " + gpu_name_ + " -> " + domain);
}

absl::Status TripRunner::RouteHome(uint64_t token) { return RouteTo(domain_, token); }

absl::Status TripRunner::SafeReturn(const TripPlan& plan, v1::TripReport* report) {
  absl::Status s = RouteHome(plan.trip);
  if (!s.ok()) return s;
  const uint64_t old_session = gpu_->session_id();
  // Whatever happened, the session whose key the holder saw must end.
  s = gpu_->Establish();
  if (!s.ok()) return s;
  report->set_rekeyed(gpu_->session_id() != old_session);
  s = gpu_->ScrubAndVerify(plan.buffer_id, plan.buffer_bytes);
  if (!s.ok()) return s;
  report->set_scrub_verified(true);
  return absl::OkStatus();
}

absl::StatusOr<v1::TripReport> TripRunner::Run(const TripPlan& plan,
                                               v1::HolderAgent::Stub* holder) {
  auto t0 = std::chrono::steady_clock::now();
  v1::TripReport report;
  report.set_trip(plan.trip);
  report.set_holder(plan.holder->name);
  report.set_window_offset(plan.window_offset);
  const HolderConfig& h = *plan.holder;
  GT_LOG(1, "trip ", plan.trip, ": ", h.name, " window [", plan.window_offset, ", +",
         plan.window_length, ")");

  // Before anything leaves: the channel with the holder, mutually attested.
  auto initiator = ChannelInitiator::Create();
  if (!initiator.ok()) return initiator.status();
  v1::OpenChannelRequest oreq;
  oreq.set_orchestrator_public_key(initiator->public_key());
  oreq.set_orchestrator_nonce(initiator->nonce());
  v1::OpenChannelResponse oresp;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(plan.timeout_seconds));
    absl::Status s = FromGrpc(holder->OpenChannel(&ctx, oreq, &oresp),
                              "holder " + h.name + " OpenChannel");
    if (!s.ok()) {
      report.set_error(std::string(s.message()));
      report.set_trip_seconds(Since(t0));
      return report;  // nothing left the orchestrator yet
    }
  }
  v1::ProvisionRequest preq;
  auto channel = initiator->Complete(oresp.holder_public_key(), oresp.holder_nonce(),
                                     oresp.evidence(), *verifier_, *attester_,
                                     preq.mutable_orchestrator_evidence());
  if (!channel.ok()) {
    report.set_error("holder " + h.name + ": " + std::string(channel.status().message()));
    report.set_trip_seconds(Since(t0));
    return report;
  }

  // The counter window on the session's LCE H2D key, persisted before use (P4).
  const uint32_t chunks = H2dWriter::ChunksFor(plan.window_length, plan.chunk_bytes);
  auto query = gpu_->QueryChannel();
  if (!query.ok()) return query.status();
  const std::string counter_file = state_dir_ + "/lce-h2d-" + gpu_->serial() + ".ctr";
  const std::string key_id = gpu_->serial() + ":" + std::to_string(gpu_->session_id());
  ::unlink(counter_file.c_str());  // the previous session's key is dead
  auto allocator = CounterWindowAllocator::Open(counter_file, key_id);
  if (!allocator.ok()) return allocator.status();
  auto window = allocator->Allocate(chunks);
  if (!window.ok()) return window.status();
  if (window->first != query->h2d_next_counter()) {
    return absl::InternalError("counter window starts at " + std::to_string(window->first) +
                               " but the copy engine expects " +
                               std::to_string(query->h2d_next_counter()));
  }

  v1::HandoffBinding* b = preq.mutable_binding();
  b->set_campaign(plan.campaign);
  b->set_trip(plan.trip);
  b->set_gpu_serial(gpu_->serial());
  b->set_gpu_session(gpu_->session_id());
  b->set_holder(h.name);
  b->set_buffer_id(plan.buffer_id);
  b->set_window_offset(plan.window_offset);
  b->set_window_length(plan.window_length);
  b->set_first_counter(window->first);
  b->set_counter_count(window->count);
  b->set_chunk_size(plan.chunk_bytes);
  ChannelMaterial lce = gpu_->LceH2dForHandoff();
  const uint64_t handed_session = gpu_->session_id();
  auto blob = WrapHandoff(channel->handoff_key, *b, lce);
  channel->handoff_key.Clear();
  if (!blob.ok()) return blob.status();
  preq.set_channel_id(oresp.channel_id());
  preq.set_wrapped_handoff(*blob);

  // Route out: from here on the GPU is away and every exit goes through
  // SafeReturn.
  absl::Status s = RouteTo(h.domain, plan.trip);
  if (!s.ok()) {
    report.set_error(std::string(s.message()));
    absl::Status safe = SafeReturn(plan, &report);
    if (!safe.ok()) return safe;
    report.set_trip_seconds(Since(t0));
    return report;
  }
  v1::ProvisionReport prep;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(plan.timeout_seconds));
    s = FromGrpc(holder->Provision(&ctx, preq, &prep), "holder " + h.name + " Provision");
  }
  // Route back and re-key whether or not provisioning worked.
  absl::Status back = RouteHome(plan.trip);
  if (!back.ok()) return back;
  absl::Status same = gpu_->VerifyStillSameSession();
  if (!same.ok()) {
    GT_LOG(0, "trip ", plan.trip, ": the GPU that came back does not hold our session: ",
           same.message());
  }
  absl::Status rekey = gpu_->Establish();
  if (!rekey.ok()) return rekey;  // cannot prove a safe state: stop the campaign
  report.set_rekeyed(gpu_->session_id() != handed_session);
  if (!s.ok() || !same.ok()) {
    report.set_error(!s.ok() ? std::string(s.message())
                             : "GPU substitution detected: " + std::string(same.message()));
  } else {
    report.set_bytes(prep.bytes());
    report.set_chunks(prep.chunks());
    report.set_seconds(prep.seconds());
    // Consume: read the window back through the new session and check that
    // the device holds exactly what the holder encrypted.
    std::string data;
    data.reserve(plan.window_length);
    absl::Status rd;
    for (uint64_t off = 0; off < plan.window_length && rd.ok(); off += 8u << 20) {
      auto piece = gpu_->Read(plan.buffer_id, off,
                              std::min<uint64_t>(8u << 20, plan.window_length - off));
      if (!piece.ok()) rd = piece.status(); else data += *piece;
    }
    if (rd.ok()) {
      auto digest = WindowDigest(lce, handed_session, plan.buffer_id, 0, data,
                                 plan.chunk_bytes, window->first);
      report.set_digest_match(digest.ok() && *digest == prep.digest() &&
                              prep.bytes() == plan.window_length);
      if (!report.digest_match()) report.set_error("digest mismatch: device contents differ");
    } else {
      report.set_error(std::string(rd.message()));
    }
    Zeroize(&data[0], data.size());
  }
  lce.key.Clear();
  ::unlink(counter_file.c_str());
  // Scrub before any other holder can get the GPU (P2).
  absl::Status scrub = gpu_->ScrubAndVerify(plan.buffer_id, plan.buffer_bytes);
  if (!scrub.ok()) return scrub;  // residue cannot be ruled out: stop everything
  report.set_scrub_verified(true);
  report.set_trip_seconds(Since(t0));
  return report;
}

}  // namespace gputravel
