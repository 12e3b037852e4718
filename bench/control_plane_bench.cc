#include "bench/control_plane_bench.h"

#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <thread>

#include "bench/plaintext_source.h"
#include "device/bounce_pool.h"
#include "device/h2d_writer.h"
#include "keyxfer/attested_channel.h"
#include "keyxfer/dev_attester.h"
#include "keyxfer/ec_key.h"
#include "keyxfer/handoff.h"
#include "keyxfer/random.h"
#include "keyxfer/x509.h"
#include "orchestrator/state_store.h"
#include "proto/device.grpc.pb.h"
#include "util/grpc_status.h"

namespace gputravel {
namespace bench {
namespace {

constexpr uint64_t kWindow = 4096;

// Runs `step` `iterations` times (after one untimed warm-up); `prepare` runs
// untimed before each sample.
absl::StatusOr<Summary> TimeStep(int iterations, const std::function<absl::Status()>& prepare,
                                 const std::function<absl::Status()>& step) {
  std::vector<double> samples;
  for (int i = 0; i <= iterations; ++i) {
    if (prepare) {
      absl::Status p = prepare();
      if (!p.ok()) return p;
    }
    auto t0 = std::chrono::steady_clock::now();
    absl::Status s = step();
    double dt = SecondsSince(t0);
    if (!s.ok()) return s;
    if (i > 0) samples.push_back(dt);
  }
  return Summarize(std::move(samples));
}

// A development attester and a verifier trusting it, as the emulated stack
// configures both ends.
struct DevAttestation {
  std::unique_ptr<DevAttester> orchestrator, holder;
  std::unique_ptr<DevVerifier> verifier;
};

absl::StatusOr<DevAttestation> MakeDevAttestation() {
  auto root = EcKey::Generate(Curve::kP256);
  if (!root.ok()) return root.status();
  auto root_der = IssueCertificate(*root, "bench-attestation-root", *root, "", true, 1);
  if (!root_der.ok()) return root_der.status();
  DevAttestation a;
  for (auto* slot : {&a.orchestrator, &a.holder}) {
    auto key = EcKey::Generate(Curve::kP256);
    if (!key.ok()) return key.status();
    const std::string domain = slot == &a.holder ? "td-holder" : "orchestrator";
    auto cert = IssueCertificate(*key, domain, *root, *root_der, false, 1);
    if (!cert.ok()) return cert.status();
    auto attester = DevAttester::Create(domain, std::move(*key), *cert, std::string(48, '\x5a'));
    if (!attester.ok()) return attester.status();
    *slot = std::move(*attester);
  }
  a.verifier = std::make_unique<DevVerifier>(*root_der, DevPolicy{});
  return a;
}

}  // namespace

absl::StatusOr<std::vector<ComponentTiming>> MeasureControlPlaneComponents(
    DeviceRig& rig, uint64_t buffer_id, const std::string& state_dir, int iterations) {
  std::vector<ComponentTiming> out;
  auto add = [&](const std::string& name, const std::string& what, int per_trip,
                 const std::function<absl::Status()>& prepare,
                 const std::function<absl::Status()>& step) -> absl::Status {
    auto s = TimeStep(iterations, prepare, step);
    if (!s.ok()) return absl::Status(s.status().code(), name + ": " + std::string(s.status().message()));
    out.push_back(ComponentTiming{name, what, per_trip, *s});
    return absl::OkStatus();
  };
  rig.RouteHome();
  GpuSession& gpu = rig.session();
  absl::Status s = gpu.Establish();
  if (!s.ok()) return s;

  auto raw = v1::Device::NewStub(MakeChannel(rig.orch_endpoint()));
  s = add("grpc_unary_rtt",
          "one unary gRPC call on a Unix socket (Device.GetIdentity); per trip: the "
          "transport of the holder's OpenChannel and Provision",
          2,
          nullptr, [&] {
            v1::DeviceIdentity id;
            grpc::ClientContext ctx;
            return FromGrpc(raw->GetIdentity(&ctx, {}, &id), "GetIdentity");
          });
  if (!s.ok()) return s;
  s = add("gpu_establish",
          "GpuSession::Establish alone, without the read-back: P-384 ECDHE (both "
          "ephemeral keys made ahead at idle priority, with an untimed 3 ms pause before "
          "each sample as a trip leaves between re-keys), device signs beside its ECDH, "
          "driver verifies beside its ECDH, each on the other CPU, device identity kept "
          "from the last exchange: 1 RPC",
          0,
          [] {
            std::this_thread::sleep_for(std::chrono::milliseconds(3));
            return absl::OkStatus();
          },
          [&] { return gpu.Establish(); });
  if (!s.ok()) return s;
  s = add("sealed_command",
          "one AES-GCM sealed control command round trip (Query); a trip needs none "
          "when it succeeds (its counter is known, its read-back is the same-session check)",
          0, nullptr, [&] { return gpu.QueryChannel().status(); });
  if (!s.ok()) return s;
  s = add("read_4k",
          "Read of the 4 KiB window on its own (a D2H copy); a trip's read-back rides on "
          "the re-key instead (rekey_with_read_4k)",
          0, nullptr, [&] { return gpu.Read(buffer_id, 0, kWindow).status(); });
  if (!s.ok()) return s;
  v1::DeviceCommand read_back;
  read_back.mutable_read()->set_buffer_id(buffer_id);
  read_back.mutable_read()->set_length(kWindow);
  s = add("rekey_with_read_4k",
          "the re-key as a trip makes it: the 4 KiB window's read-back (the same-session "
          "check and the digest's input) rides on the KeyExchange request and runs under "
          "the old session, then the P-384 ECDHE as gpu_establish (3 ms pause before "
          "each sample): 1 RPC",
          1,
          [] {
            std::this_thread::sleep_for(std::chrono::milliseconds(3));
            return absl::OkStatus();
          },
          [&]() -> absl::Status {
            GpuSession::PriorOutcome outcome;
            absl::Status st = gpu.EstablishAfter(read_back, &outcome);
            if (!st.ok()) return st;
            if (!outcome.session.ok()) return outcome.session;
            return outcome.reply.status();
          });
  if (!s.ok()) return s;
  s = add("scrub_and_verify_4k",
          "ScrubAndVerify of a 4 KiB buffer (one sealed scrub command that reads the "
          "buffer back after zeroing)",
          1, nullptr, [&] { return gpu.ScrubAndVerify(buffer_id, kWindow); });
  if (!s.ok()) return s;

  auto attestation = MakeDevAttestation();
  if (!attestation.ok()) return attestation.status();
  s = add("attested_channel",
          "mutual attested key agreement, crypto only: 2 P-256 ECDHE, 2 dev evidence "
          "signatures, 2 evidence verifications (attestation-key certificates cached); "
          "once per trip, prepared beside the previous trip's scrub",
          1, nullptr, [&]() -> absl::Status {
            auto init = ChannelInitiator::Create();
            if (!init.ok()) return init.status();
            auto resp = ChannelResponder::Respond(init->public_key(), init->nonce(),
                                                  *attestation->holder);
            if (!resp.ok()) return resp.status();
            Evidence own;
            auto ch = init->Complete(resp->public_key(), resp->nonce(), resp->evidence(),
                                     *attestation->verifier, *attestation->orchestrator, &own);
            if (!ch.ok()) return ch.status();
            return resp->Confirm(own, *attestation->verifier).status();
          });
  if (!s.ok()) return s;

  SecretBytes handoff_key = SecretBytes::FromString(RandomString(32));
  // Fetched once: a second fetch in the same session rotates the IV (an RPC).
  auto lce_or = gpu.H2dKeysForHandoff(1);
  if (!lce_or.ok()) return lce_or.status();
  const std::vector<ChannelMaterial> lce = std::move(*lce_or);
  s = add("handoff_wrap_unwrap", "WrapHandoff + UnwrapHandoff of the LCE key", 1, nullptr,
          [&]() -> absl::Status {
            v1::HandoffBinding b;
            b.set_campaign("bench");
            b.set_trip(1);
            b.set_window_length(kWindow);
            b.add_lanes()->set_length(kWindow);
            auto blob = WrapHandoff(handoff_key, b, lce);
            if (!blob.ok()) return blob.status();
            return UnwrapHandoff(handoff_key, b, *blob).status();
          });
  if (!s.ok()) return s;

  // The orchestrator's durable record of one trip, as the engine writes it
  // (9 commits, 2 of them fsynced), in a scratch database in `state_dir`.
  char tmpl[4096];
  std::snprintf(tmpl, sizeof(tmpl), "%s/gputravel-bench-state-XXXXXX", state_dir.c_str());
  if (::mkdtemp(tmpl) == nullptr) {
    return absl::InternalError("cannot create a scratch directory in " + state_dir);
  }
  const std::string scratch = tmpl;
  {
    auto store = StateStore::Open(scratch + "/orchestrator.db", scratch + "/checkpoint.key");
    if (!store.ok()) return store.status();
    CampaignRow c;
    c.name = "bench";
    c.request_id = "bench";
    c.spec_json = "{}";
    c.gpu = "gpu0";
    HolderRow h;
    h.name = "h";
    h.dataset_bytes = kWindow;
    absl::Status st = (*store)->CreateCampaign(c, {h}).status();
    if (st.ok()) st = (*store)->SetCampaignState("bench", kCampaignRunning, "", "").status();
    if (!st.ok()) return st;
    s = add("state_store_trip",
            "the orchestrator's durable record of one trip in SQLite (WAL) in " + state_dir +
                ": trip id, BeginTrip, 4 steps, the provisioning report with step scrub, "
                "scrubbed event, FinishTrip (9 commits); 2 of them fsynced (route_out, "
                "FinishTrip; a trainer adds RecordTrained)",
            1, nullptr, [&]() -> absl::Status {
              StateStore& db = **store;
              auto id = db.NextTripId();
              if (!id.ok()) return id.status();
              TripRow t;
              t.id = *id;
              t.campaign = "bench";
              t.holder = "h";
              t.window_length = kWindow;
              std::vector<absl::StatusOr<EventSeqs>> r;
              r.push_back(db.BeginTrip(t));
              r.push_back(db.SetTripStep(*id, kStepRouteOut, "", TripCounterWindow{1, 1, 1}));
              r.push_back(db.SetTripStep(*id, kStepProvision, ""));
              r.push_back(db.SetTripStep(*id, kStepRouteBack, ""));
              r.push_back(db.SetTripStep(*id, kStepRekey, ""));
              r.push_back(db.RecordProvisioned(*id, kWindow, 1, 0.001, true, kStepScrub, ""));
              EventRow e;
              e.campaign = "bench";
              e.trip = *id;
              e.kind = "scrubbed";
              auto ev = db.AppendEvent(e);
              if (!ev.ok()) return ev.status();
              TripFinish f;
              f.outcome = kOutcomeAborted;  // leaves the cursor where it is
              f.scrub_verified = true;
              f.rekeyed = true;
              r.push_back(db.FinishTrip(*id, f));
              for (const auto& x : r) {
                if (!x.ok()) return x.status();
              }
              return absl::OkStatus();
            });
  }
  std::filesystem::remove_all(scratch);
  if (!s.ok()) return s;

  PlaintextSource source(kWindow);
  RigHandoff handoff;
  auto hand = [&]() -> absl::Status {
    auto h = rig.HandToHolder();
    if (!h.ok()) return h.status();
    handoff = std::move(*h);
    return absl::OkStatus();
  };
  H2dWriterOptions wo;
  wo.chunk_size = kWindow;
  wo.bounce_dir = rig.holder_shared_dir();
  BouncePool kept_ring(wo.bounce_dir);
  auto write_with = [&](std::shared_ptr<grpc::Channel> channel,
                        BouncePool* pool) -> absl::Status {
    H2dWriterOptions o = wo;
    o.pool = pool;
    H2dWriter writer(std::move(channel), o);
    return writer
        .Write(handoff.key, handoff.session_id, buffer_id, 0, kWindow,
               CounterWindow{handoff.next_counter, 1}, source.AsChunkSource())
        .status();
  };
  s = add("h2d_write_4k",
          "holder's H2dWriter::Write of 4 KiB as the holder agent does it on every trip: "
          "its gRPC channel and bounce ring kept from the last trip, one unary SubmitH2D "
          "on the calling thread that attaches the ring and releases it (a one-chunk "
          "window starts no threads)",
          1, hand, [&] { return write_with(rig.holder_channel(), &kept_ring); });
  if (!s.ok()) return s;
  s = add("h2d_write_4k_cold",
          "the same on a new gRPC channel with a new bounce ring (a holder agent's first "
          "trip)",
          0, hand,
          [&] { return write_with(MakeChannel(rig.holder_endpoint()), nullptr); });
  rig.RouteHome();
  if (!s.ok()) return s;
  return out;
}

}  // namespace bench
}  // namespace gputravel
