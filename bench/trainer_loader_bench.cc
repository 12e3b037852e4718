// trainer_loader_bench: the loader as an external trainer sees it. Windows
// of llm.c tokens go through the Trainer service (a RemoteTrainer behind
// orchestrator/trainer_service.h, mTLS on a Unix socket, the generated stub
// reading every batch, reporting every window and answering every lease
// release) and, in the same run, through the in-process DataLoader (the
// built-in trainer's path, Next + Report on a thread) and a plain memcpy of
// the same bytes. Reports batches/s and MB/s of each and the service's
// ratio to both references. See docs/performance.md.
//
//   bazel run -c opt //bench:trainer_loader_bench -- [--json] [--quick]
//       [--windows N] [--window_mib M] [--batch_tokens B] [--rounds R]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "auth/identity.h"
#include "auth/pki.h"
#include "auth/role_gate.h"
#include "auth/tls_config.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "orchestrator/trainer_registry.h"
#include "orchestrator/trainer_service.h"
#include "orchestrator/trip_steps.h"
#include "proto/trainer.grpc.pb.h"
#include "trainer/data_loader.h"
#include "trainer/remote_trainer.h"
#include "util/flags.h"
#include "util/server_limits.h"

namespace gputravel {
namespace {

using Clock = std::chrono::steady_clock;

struct Figure {
  double seconds = 0;
  uint64_t batches = 0;
  uint64_t bytes = 0;  // token bytes delivered (overlap tokens included)
  double batches_per_second() const { return batches / seconds; }
  double mbps() const { return bytes / seconds / 1e6; }
};

TrainingWindow MakeWindow(uint64_t trip, uint64_t tokens) {
  TrainingWindow w;
  w.campaign = "bench";
  w.trip = trip;
  w.holder = "h";
  w.tokens.resize(tokens * 2);
  for (uint64_t i = 0; i < tokens; ++i) {
    const uint16_t t = static_cast<uint16_t>(i * 2654435761u >> 16);
    std::memcpy(&w.tokens[2 * i], &t, 2);
  }
  return w;
}

// The built-in trainer's path: a consumer thread pulls and reports.
Figure InProcess(int windows, uint64_t tokens, size_t batch_tokens) {
  DataLoader loader(batch_tokens);
  Figure f;
  std::thread consumer([&] {
    while (true) {
      auto b = loader.Next(absl::Seconds(60));
      if (!b.ok()) return;
      ++f.batches;
      f.bytes += b->tokens.size() * 2;
      (void)loader.Report(b->trip, b->offset_in_window, 1.0);
    }
  });
  std::vector<TrainingWindow> ws;
  for (int i = 0; i < windows; ++i) ws.push_back(MakeWindow(i + 1, tokens));
  const auto t0 = Clock::now();
  for (auto& w : ws) (void)loader.Offer(std::move(w), absl::Seconds(600));
  f.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  loader.Close();
  consumer.join();
  return f;
}

// The same bytes copied once, batch by batch.
Figure Memcpy(int windows, uint64_t tokens, size_t batch_tokens) {
  TrainingWindow w = MakeWindow(1, tokens);
  std::vector<char> dst(2 * (batch_tokens + 1));
  Figure f;
  const auto t0 = Clock::now();
  for (int i = 0; i < windows; ++i) {
    for (uint64_t k = 0; k + 1 < tokens; k += batch_tokens) {
      const uint64_t n = std::min<uint64_t>(batch_tokens + 1, tokens - k);
      std::memcpy(dst.data(), w.tokens.data() + 2 * k, 2 * n);
      asm volatile("" : : "r"(dst.data()) : "memory");
      ++f.batches;
      f.bytes += 2 * n;
    }
  }
  f.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  static volatile char sink;
  sink = dst[0];  // the copies are used
  return f;
}

// Through the Trainer service over mTLS on a Unix socket.
absl::StatusOr<Figure> ThroughService(const std::string& dir, int windows, uint64_t tokens,
                                      size_t batch_tokens) {
  const Identity orch{kRoleOrchestrator, "orch"}, trainer{kRoleTrainer, "t1"};
  auto files = [&](const Identity& id) {
    TlsFiles t;
    t.ca = CaCertPath(dir);
    t.cert = IdentityCertPath(dir, id);
    t.key = IdentityKeyPath(dir, id);
    return t;
  };
  auto creds = MakeServerCredentials(files(orch));
  if (!creds.ok()) return creds.status();
  InstallRoleGate(creds->get(), TrainerServiceRoles());
  TrainerRegistry registry;
  TrainerServiceImpl service(
      [](const std::string&) -> absl::StatusOr<TrainerCampaignInfo> {
        return TrainerCampaignInfo{"external", "t1", kCampaignRunning, ""};
      },
      &registry);
  grpc::ServerBuilder builder;
  const std::string address = "unix:" + dir + "/trainer.sock";
  builder.AddListeningPort(address, *creds);
  builder.RegisterService(&service);
  ApplyServerLimits(TrainerServiceLimits(), "trainer_bench", &builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return absl::InternalError("cannot serve " + address);

  RemoteTrainer::Options o;
  o.campaign = "bench";
  o.identity = "t1";
  o.batch_tokens = batch_tokens;
  o.vocab = 50257;
  auto remote = std::make_shared<RemoteTrainer>(o, ResumePoint{});
  registry.Register("bench", remote);
  std::vector<TrainingWindow> ws;
  for (int i = 0; i < windows; ++i) ws.push_back(MakeWindow(i + 1, tokens));
  std::thread engine([&] {
    for (auto& w : ws) {
      (void)remote->TrainWindow(
          std::move(w), [](const WindowResult&, const ResumePoint&) { return absl::OkStatus(); },
          nullptr);
    }
  });

  auto channel = MakeSecureChannel(address, files(trainer), orch);
  if (!channel.ok()) return channel.status();
  auto stub = v1::Trainer::NewStub(*channel);
  grpc::ClientContext ctx;
  v1::AttachRequest req;
  req.set_campaign("bench");
  Figure f;
  auto reader = stub->Attach(&ctx, req);
  v1::TrainerMessage m;
  // Timed from the Resume on: the connection's TLS handshake is once per
  // trainer, not per window.
  if (!reader->Read(&m) || !m.has_resume()) return absl::InternalError("no Resume");
  const auto t0 = Clock::now();
  int reported = 0, batches = 0, released = 0;
  uint64_t window_tokens = 0;
  while (released < windows && reader->Read(&m)) {
    if (m.has_lease() && m.lease().release()) {
      grpc::ClientContext rc;
      v1::LeaseReleased rel;
      rel.set_campaign("bench");
      rel.set_lease_id(m.lease().lease_id());
      v1::LeaseReleasedAck ack;
      (void)stub->ReleaseLease(&rc, rel, &ack);
      ++released;
    }
    if (!m.has_batch()) continue;
    const uint64_t n = m.batch().tokens().size() / 2;
    ++f.batches;
    f.bytes += m.batch().tokens().size();
    window_tokens += batches == 0 ? n : n - 1;
    ++batches;
    if (m.batch().last_of_window()) {
      v1::WindowReport r;
      r.set_campaign("bench");
      r.set_trip(m.batch().trip());
      r.set_tokens(window_tokens);
      for (int i = 0; i < batches; ++i) r.add_batch_loss(1.0);
      r.set_checkpoint_sha256(std::string(32, 'c'));
      grpc::ClientContext rc;
      v1::WindowCommitted done;
      grpc::Status s = stub->ReportWindow(&rc, r, &done);
      if (!s.ok()) return absl::InternalError("ReportWindow: " + s.error_message());
      ++reported;
      batches = 0;
      window_tokens = 0;
    }
  }
  f.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  engine.join();
  ctx.TryCancel();
  (void)reader->Finish();
  service.Shutdown();
  registry.Unregister("bench", remote.get());
  remote->Close(absl::OkStatus());
  server->Shutdown();
  return f;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace gputravel

int main(int argc, char** argv) {
  using namespace gputravel;
  Flags flags("trainer_loader_bench",
              "Batches/s and MB/s of windows through the Trainer service (mTLS, Unix socket),\n"
              "as ratios to the in-process DataLoader and to memcpy of the same bytes, measured\n"
              "in the same rounds. Run it with -c opt.");
  flags.Bool("json", "Print one JSON object instead of a table.");
  flags.Bool("quick", "Tiny sizes (a smoke run, not figures).");
  flags.Int("windows", 4, 1, 1000, "Windows per round.");
  flags.Int("window_mib", 16, 1, 4096, "MiB per window.");
  flags.Int("batch_tokens", 65536, 2, 16 << 20, "Tokens per batch (the overlap token not counted).");
  flags.Int("rounds", 3, 1, 100, "Rounds (each measures all three, in turn).");
  absl::Status s = flags.Parse(argc, argv);
  if (!s.ok()) {
    std::fprintf(stderr, "trainer_loader_bench: %s (see --help)\n",
                 std::string(s.message()).c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  const bool quick = flags.IsSet("quick");
  const int windows = quick ? 2 : flags.GetInt("windows");
  const uint64_t tokens = (static_cast<uint64_t>(quick ? 1 : flags.GetInt("window_mib")) << 20) / 2;
  const size_t batch_tokens = quick ? 4096 : flags.GetInt("batch_tokens");
  const int rounds = quick ? 1 : flags.GetInt("rounds");

  char tmpl[] = "/tmp/gputravel-trainer-bench-XXXXXX";
  const char* made = mkdtemp(tmpl);
  if (made == nullptr) {
    std::fprintf(stderr, "trainer_loader_bench: cannot make a temporary directory\n");
    return 1;
  }
  const std::string dir = std::string(made) + "/pki";
  s = InitCampaignCa(dir, "bench", 2);
  for (const Identity& id : {Identity{kRoleOrchestrator, "orch"}, Identity{kRoleTrainer, "t1"}}) {
    if (s.ok()) s = IssueIdentity(dir, id, 1).status();
  }
  if (!s.ok()) {
    std::fprintf(stderr, "trainer_loader_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::vector<Figure> service, in_process, copy;
  for (int r = 0; r < rounds; ++r) {
    auto f = ThroughService(dir, windows, tokens, batch_tokens);
    if (!f.ok()) {
      std::fprintf(stderr, "trainer_loader_bench: %s\n", std::string(f.status().message()).c_str());
      return 1;
    }
    service.push_back(*f);
    in_process.push_back(InProcess(windows, tokens, batch_tokens));
    copy.push_back(Memcpy(windows, tokens, batch_tokens));
  }
  (void)std::system(("rm -rf " + std::string(made)).c_str());
  auto median = [](const std::vector<Figure>& v, bool mbps) {
    std::vector<double> x;
    for (const auto& f : v) x.push_back(mbps ? f.mbps() : f.batches_per_second());
    return Median(x);
  };
  std::vector<double> vs_loader, vs_memcpy;
  for (int r = 0; r < rounds; ++r) {
    vs_loader.push_back(service[r].mbps() / in_process[r].mbps());
    vs_memcpy.push_back(service[r].mbps() / copy[r].mbps());
  }
  const double ratio_loader = Median(vs_loader), ratio_memcpy = Median(vs_memcpy);
  if (flags.IsSet("json")) {
    nlohmann::json j = {{"windows", windows},
                        {"window_bytes", tokens * 2},
                        {"batch_tokens", batch_tokens},
                        {"rounds", rounds},
                        {"service_batches_per_second", median(service, false)},
                        {"service_mbps", median(service, true)},
                        {"in_process_batches_per_second", median(in_process, false)},
                        {"in_process_mbps", median(in_process, true)},
                        {"memcpy_mbps", median(copy, true)},
                        {"ratio_to_in_process", ratio_loader},
                        {"ratio_to_memcpy", ratio_memcpy}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%d windows of %llu MiB in %zu-token batches, median of %d rounds\n", windows,
                static_cast<unsigned long long>((tokens * 2) >> 20), batch_tokens, rounds);
    std::printf("  %-28s %12s %10s\n", "", "batches/s", "MB/s");
    std::printf("  %-28s %12.0f %10.0f\n", "Trainer service (mTLS, unix)",
                median(service, false), median(service, true));
    std::printf("  %-28s %12.0f %10.0f\n", "in-process DataLoader", median(in_process, false),
                median(in_process, true));
    std::printf("  %-28s %12s %10.0f\n", "memcpy", "", median(copy, true));
    std::printf("  service / in-process %.3f, service / memcpy %.4f\n", ratio_loader,
                ratio_memcpy);
  }
  return 0;
}
