// The client commands against a fake Orchestrator service: a real gRPC server
// on a Unix socket with mutual TLS (certificates from auth/pki in a temporary
// directory), in-memory campaigns and scripted event streams. Each command runs
// in this process through RunClientCommand with stdout/stderr redirected to
// files (or a pseudo-terminal), and the test checks output and exit codes.
#include "cli/client_commands.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "auth/authorize.h"
#include "auth/identity.h"
#include "auth/pki.h"
#include "auth/tls_config.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/orchestrator.grpc.pb.h"
#include "util/files.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMiB = 1ull << 20;
constexpr int64_t kBaseMs = 1735732800000;  // 2025-01-01T12:00:00Z.
constexpr int64_t kCancelMs = kBaseMs + 100000;

// --- the fake orchestrator ---------------------------------------------------

v1::Event Ev(int64_t seq, const std::string& campaign, v1::EventKind kind, uint64_t trip = 0,
             const std::string& holder = "", v1::TripStep step = v1::TRIP_STEP_UNSPECIFIED,
             const std::string& message = "") {
  v1::Event e;
  e.set_seq(seq);
  e.set_campaign(campaign);
  e.set_kind(kind);
  e.set_trip(trip);
  e.set_holder(holder);
  e.set_step(step);
  e.set_message(message);
  e.set_time_unix_ms(kBaseMs + seq * 1000);
  return e;
}

v1::Event StateEv(int64_t seq, const std::string& campaign, v1::CampaignState s,
                  const std::string& message = "") {
  v1::Event e = Ev(seq, campaign, v1::CAMPAIGN_STATE, 0, "", v1::TRIP_STEP_UNSPECIFIED, message);
  e.set_campaign_state(s);
  return e;
}

// One trip to hospital-a and back, then the campaign ends in `final_state`.
std::vector<v1::Event> TripScript(const std::string& c, v1::CampaignState final_state,
                                  const std::string& final_message) {
  std::vector<v1::Event> s;
  s.push_back(StateEv(1, c, v1::RUNNING));
  s.push_back(Ev(2, c, v1::TRIP_STARTED, 1, "hospital-a", v1::PLANNED, "window 0 +64.0 MiB"));
  s.push_back(Ev(3, c, v1::STEP, 1, "hospital-a", v1::ROUTE_OUT));
  s.push_back(Ev(4, c, v1::STEP, 1, "hospital-a", v1::PROVISION));
  for (uint64_t mib : {16, 32, 64}) {
    v1::Event p = Ev(0, c, v1::PROGRESS, 1, "hospital-a", v1::PROVISION);
    p.set_time_unix_ms(kBaseMs + 4500);
    p.set_bytes(mib * kMiB);
    p.set_total_bytes(64 * kMiB);
    s.push_back(p);
  }
  v1::Event prov = Ev(5, c, v1::PROVISIONED, 1, "hospital-a", v1::PROVISION);
  prov.set_bytes(64 * kMiB);
  prov.set_total_bytes(64 * kMiB);
  s.push_back(prov);
  v1::Event trained = Ev(6, c, v1::TRAINED, 1, "hospital-a", v1::TRAIN);
  trained.set_loss(0.5);
  trained.set_has_loss(true);
  s.push_back(trained);
  s.push_back(Ev(7, c, v1::SCRUBBED, 1, "hospital-a", v1::SCRUB, "buffer zeroed and verified"));
  s.push_back(Ev(8, c, v1::TRIP_FINISHED, 1, "hospital-a", v1::DONE, "ok"));
  if (final_state == v1::FAILED) {
    s.push_back(Ev(9, c, v1::ERROR, 0, "hospital-b", v1::TRIP_STEP_UNSPECIFIED, final_message));
    s.push_back(StateEv(10, c, final_state, final_message));
  } else {
    s.push_back(StateEv(9, c, final_state, final_message));
  }
  return s;
}

// What the stream of a campaign being cancelled looks like: old events, then
// (at kCancelMs) the cancel, the aborted trip and the final state.
std::vector<v1::Event> CancelScript(const std::string& c) {
  std::vector<v1::Event> s;
  s.push_back(StateEv(1, c, v1::RUNNING, "old-event-before-cancel"));
  s.push_back(Ev(2, c, v1::TRIP_STARTED, 7, "hospital-a", v1::PLANNED, "old-event-before-cancel"));
  v1::Event a = StateEv(3, c, v1::CANCELLING, "cancel requested by operator 'alice'");
  a.set_time_unix_ms(kCancelMs);
  s.push_back(a);
  v1::Event b = Ev(4, c, v1::STEP, 7, "hospital-a", v1::ABORTED, "trip made safe");
  b.set_time_unix_ms(kCancelMs + 10);
  s.push_back(b);
  v1::Event d = StateEv(5, c, v1::CANCELLED);
  d.set_time_unix_ms(kCancelMs + 20);
  s.push_back(d);
  return s;
}

class FakeOrchestrator final : public v1::Orchestrator::Service {
 public:
  FakeOrchestrator() {
    v1::Campaign alpha = Make("alpha", v1::RUNNING);
    alpha.set_trips_ok(3);
    alpha.set_trips_failed(1);
    alpha.set_bytes_provisioned(256 * kMiB);
    alpha.set_bytes_total(1024 * kMiB);
    alpha.set_last_loss(0.1234);
    alpha.set_has_loss(true);
    auto* h = alpha.add_holders();
    h->set_campaign("alpha");
    h->set_name("hospital-a");
    h->set_endpoint("unix:/run/hospital-a.sock");
    h->set_dataset_bytes(512 * kMiB);
    h->set_cursor_offset(64 * kMiB);
    h->set_state("active");
    h->set_trips(2);
    h->set_bytes(128 * kMiB);
    h = alpha.add_holders();
    h->set_campaign("alpha");
    h->set_name("hospital-b");
    h->set_state("failed");
    h->set_error("holder unreachable");
    h->set_round(1);
    v1::Trip* t = alpha.add_trips();
    t->set_id(1);
    t->set_campaign("alpha");
    t->set_holder("hospital-a");
    t->set_window_length(64 * kMiB);
    t->set_step(v1::DONE);
    t->set_outcome("ok");
    t->set_bytes(64 * kMiB);
    t->set_provision_seconds(0.5);
    t->set_digest_match(true);
    t->set_scrub_verified(true);
    t->set_rekeyed(true);
    t->set_loss(0.25);
    t->set_has_loss(true);
    t = alpha.add_trips();
    t->set_id(2);
    t->set_holder("hospital-b");
    t->set_step(v1::DONE);
    t->set_outcome("failed");
    t->set_error("digest mismatch");
    t->set_scrub_verified(true);
    t->set_rekeyed(true);
    t = alpha.add_trips();
    t->set_id(3);
    t->set_holder("hospital-a");
    t->set_window_offset(64 * kMiB);
    t->set_window_length(64 * kMiB);
    t->set_step(v1::PROVISION);
    Put(alpha);
    Put(Make("done", v1::COMPLETED));
    Put(Make("fresh", v1::CREATED));
    Put(Make("p1", v1::RUNNING));
    Put(Make("k1", v1::RUNNING));
    Put(Make("slow", v1::RUNNING));
    for (const char* n : {"c-run", "c-run2"}) {
      Put(Make(n, v1::RUNNING));
      scripts_[n] = CancelScript(n);
    }
    Put(Make("wdone", v1::RUNNING));
    scripts_["wdone"] = TripScript("wdone", v1::COMPLETED, "");
    Put(Make("wfail", v1::RUNNING));
    scripts_["wfail"] = TripScript("wfail", v1::FAILED, "holder hospital-b failed 3 times");
    Put(Make("wcancel", v1::RUNNING));
    scripts_["wcancel"] = TripScript("wcancel", v1::CANCELLED, "cancelled by operator");
    Put(Make("wbroken", v1::RUNNING));
    scripts_["wbroken"] = {StateEv(1, "wbroken", v1::RUNNING)};
    Put(Make("unauth", v1::RUNNING));
    Put(Make("broken", v1::RUNNING));
    // Hostile text from the server: terminal escape sequences (clear screen,
    // window title, colour, cursor moves) in an error, a holder name and a
    // trip error. No holders: `holders --json` counts every campaign's.
    v1::Campaign evil = Make("evil", v1::FAILED);
    evil.set_error("boom\x1b[2J\x1b]0;pwned\x07");
    v1::Trip* et = evil.add_trips();
    et->set_id(1);
    et->set_holder("h\x1b[31m");
    et->set_step(v1::DONE);
    et->set_outcome("failed");
    et->set_error("x\x1b[1A\r\nFAKE LINE");
    Put(evil);
    Put(Make("evil-watch", v1::RUNNING));
    scripts_["evil-watch"] = {
        Ev(1, "evil-watch", v1::ERROR, 1, "h\x1b[31m", v1::TRIP_STEP_UNSPECIFIED, "oops\x1b[2K"),
        StateEv(2, "evil-watch", v1::FAILED, "boom\x1b[2J")};
    gpus_.resize(2);
    gpus_[0].set_name("gpu0");
    gpus_[0].set_serial("H100-SN-0001");
    gpus_[0].set_campaign("alpha");
    gpus_[1].set_name("gpu1");
  }

  int create_calls() {
    std::lock_guard<std::mutex> l(mu_);
    return create_calls_;
  }

  grpc::Status CreateCampaign(grpc::ServerContext* ctx, const v1::CreateCampaignRequest* req,
                              v1::CreateCampaignResponse* out) override {
    grpc::Status s = Authorize(*ctx, {kRoleOperator, kRoleScheduler});
    if (!s.ok()) return s;
    std::lock_guard<std::mutex> l(mu_);
    ++create_calls_;
    if (req->request_id().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "request_id: empty");
    }
    json spec = json::parse(req->spec_json(), nullptr, false);
    if (spec.is_discarded() || !spec.is_object()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "spec_json: not a JSON object");
    }
    if (!spec.contains("name") || !spec["name"].is_string()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "spec: name: missing");
    }
    std::string name = spec["name"];
    auto r = requests_.find(req->request_id());
    if (r != requests_.end()) {
      if (r->second.first != req->spec_json()) {
        return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                            "request_id " + req->request_id() +
                                " was used for another specification");
      }
      *out->mutable_campaign() = campaigns_[r->second.second];
      out->set_created(false);
      return grpc::Status::OK;
    }
    if (campaigns_.count(name)) {
      return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                          "campaign '" + name + "' already exists");
    }
    v1::Campaign c = Make(name, v1::CREATED);
    c.set_spec_json(req->spec_json());
    campaigns_[name] = c;
    requests_[req->request_id()] = {req->spec_json(), name};
    *out->mutable_campaign() = c;
    out->set_created(true);
    return grpc::Status::OK;
  }

  grpc::Status GetCampaign(grpc::ServerContext* ctx, const v1::GetCampaignRequest* req,
                           v1::Campaign* out) override {
    v1::Campaign* c = nullptr;
    std::unique_lock<std::mutex> l(mu_, std::defer_lock);
    grpc::Status s = Lookup(ctx, req->name(), &l, &c);
    if (!s.ok()) return s;
    *out = *c;
    if (!req->include_trips()) out->clear_trips();
    return grpc::Status::OK;
  }

  grpc::Status ListCampaigns(grpc::ServerContext* ctx, const v1::ListCampaignsRequest*,
                             v1::ListCampaignsResponse* out) override {
    grpc::Status s = Authorize(*ctx, {kRoleOperator, kRoleScheduler});
    if (!s.ok()) return s;
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [n, c] : campaigns_) {
      v1::Campaign* o = out->add_campaigns();
      *o = c;
      o->clear_trips();
    }
    return grpc::Status::OK;
  }

  grpc::Status StartCampaign(grpc::ServerContext* ctx, const v1::CampaignRef* req,
                             v1::Campaign* out) override {
    return Transition(ctx, req->name(), out, "started", {v1::CREATED}, {v1::RUNNING},
                      v1::RUNNING);
  }
  grpc::Status PauseCampaign(grpc::ServerContext* ctx, const v1::CampaignRef* req,
                             v1::Campaign* out) override {
    return Transition(ctx, req->name(), out, "paused", {v1::RUNNING}, {v1::PAUSED}, v1::PAUSED);
  }
  grpc::Status ResumeCampaign(grpc::ServerContext* ctx, const v1::CampaignRef* req,
                              v1::Campaign* out) override {
    return Transition(ctx, req->name(), out, "resumed", {v1::PAUSED, v1::CREATED}, {},
                      v1::RUNNING);
  }
  grpc::Status SkipHolder(grpc::ServerContext* ctx, const v1::SkipHolderRequest* req,
                          v1::Campaign* out) override {
    std::unique_lock<std::mutex> l(mu_, std::defer_lock);
    v1::Campaign* c = nullptr;
    grpc::Status s = Lookup(ctx, req->campaign(), &l, &c);
    if (!s.ok()) return s;
    if (c->state() != v1::PAUSED) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "campaign '" + req->campaign() + "' is not paused");
    }
    *out = *c;  // the answer only: the fake's campaigns serve every test
    v1::HolderStatus* h = out->add_holders();
    h->set_name(req->holder());
    h->set_state("skipped");
    h->set_error("skipped by operator: " + req->reason());
    return grpc::Status::OK;
  }
  grpc::Status CancelCampaign(grpc::ServerContext* ctx, const v1::CampaignRef* req,
                              v1::Campaign* out) override {
    grpc::Status s = Transition(ctx, req->name(), out, "cancelled",
                                {v1::CREATED, v1::RUNNING, v1::PAUSED}, {v1::CANCELLING},
                                v1::CANCELLING);
    if (s.ok()) {
      std::lock_guard<std::mutex> l(mu_);
      campaigns_[req->name()].set_updated_unix_ms(kCancelMs);
      out->set_updated_unix_ms(kCancelMs);
    }
    return s;
  }

  grpc::Status WatchCampaign(grpc::ServerContext* ctx, const v1::WatchCampaignRequest* req,
                             grpc::ServerWriter<v1::Event>* w) override {
    std::vector<v1::Event> script;
    {
      v1::Campaign* c = nullptr;
      std::unique_lock<std::mutex> l(mu_, std::defer_lock);
      grpc::Status s = Lookup(ctx, req->name(), &l, &c);
      if (!s.ok()) return s;
      script = scripts_[req->name()];
    }
    int64_t prev_seq = 0;
    for (const v1::Event& e : script) {
      bool live = e.seq() == 0;
      if (live ? prev_seq < req->after_seq() : e.seq() <= req->after_seq()) {
        if (!live) prev_seq = e.seq();
        continue;
      }
      if (!live) prev_seq = e.seq();
      if (e.kind() == v1::CAMPAIGN_STATE) {
        std::lock_guard<std::mutex> l(mu_);
        campaigns_[req->name()].set_state(e.campaign_state());
        if (e.campaign_state() == v1::FAILED) campaigns_[req->name()].set_error(e.message());
      }
      if (!w->Write(e)) return grpc::Status::CANCELLED;
    }
    if (req->name() == "wbroken") {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "orchestrator shutting down");
    }
    return grpc::Status::OK;
  }

  grpc::Status ListHolders(grpc::ServerContext* ctx, const v1::ListHoldersRequest* req,
                           v1::ListHoldersResponse* out) override {
    grpc::Status s = Authorize(*ctx, {kRoleOperator, kRoleScheduler});
    if (!s.ok()) return s;
    std::lock_guard<std::mutex> l(mu_);
    if (!req->campaign().empty() && !campaigns_.count(req->campaign())) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "no campaign named '" + req->campaign() + "'");
    }
    for (const auto& [n, c] : campaigns_) {
      if (!req->campaign().empty() && n != req->campaign()) continue;
      for (const auto& h : c.holders()) *out->add_holders() = h;
    }
    return grpc::Status::OK;
  }

  grpc::Status ListGpus(grpc::ServerContext* ctx, const v1::ListCampaignGpusRequest*,
                        v1::ListCampaignGpusResponse* out) override {
    grpc::Status s = Authorize(*ctx, {kRoleOperator, kRoleScheduler});
    if (!s.ok()) return s;
    for (const auto& g : gpus_) *out->add_gpus() = g;
    return grpc::Status::OK;
  }

 private:
  static v1::Campaign Make(const std::string& name, v1::CampaignState s) {
    v1::Campaign c;
    c.set_name(name);
    c.set_state(s);
    c.set_gpu("gpu0");
    c.set_spec_json("{\"name\":\"" + name + "\"}");
    c.set_created_unix_ms(kBaseMs);
    c.set_updated_unix_ms(kBaseMs + 60000);
    return c;
  }
  void Put(const v1::Campaign& c) { campaigns_[c.name()] = c; }

  // Authorization, the scripted failures, and NOT_FOUND; locks `l` on success.
  grpc::Status Lookup(grpc::ServerContext* ctx, const std::string& name,
                      std::unique_lock<std::mutex>* l, v1::Campaign** out) {
    grpc::Status s = Authorize(*ctx, {kRoleOperator, kRoleScheduler});
    if (!s.ok()) return s;
    if (name == "unauth") {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "certificate revoked");
    }
    if (name == "broken") return grpc::Status(grpc::StatusCode::INTERNAL, "database is locked");
    // Answers only once the caller gave up (its deadline), or after 30 s.
    for (int i = 0; name == "slow" && i < 3000 && !ctx->IsCancelled(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    l->lock();
    auto it = campaigns_.find(name);
    if (it == campaigns_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no campaign named '" + name + "'");
    }
    *out = &it->second;
    return grpc::Status::OK;
  }

  grpc::Status Transition(grpc::ServerContext* ctx, const std::string& name, v1::Campaign* out,
                          const std::string& verb, std::vector<v1::CampaignState> from,
                          std::vector<v1::CampaignState> noop, v1::CampaignState to) {
    v1::Campaign* c = nullptr;
    std::unique_lock<std::mutex> l(mu_, std::defer_lock);
    grpc::Status s = Lookup(ctx, name, &l, &c);
    if (!s.ok()) return s;
    auto in = [&](const std::vector<v1::CampaignState>& v) {
      return std::find(v.begin(), v.end(), c->state()) != v.end();
    };
    if (in(from)) {
      c->set_state(to);
    } else if (!in(noop)) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "campaign '" + name + "' is " + v1::CampaignState_Name(c->state()) +
                              " and cannot be " + verb);
    }
    *out = *c;
    out->clear_trips();
    return grpc::Status::OK;
  }

  std::mutex mu_;
  std::map<std::string, v1::Campaign> campaigns_;
  std::map<std::string, std::pair<std::string, std::string>> requests_;
  std::map<std::string, std::vector<v1::Event>> scripts_;
  std::vector<v1::CampaignGpu> gpus_;
  int create_calls_ = 0;
};

// --- fixture -------------------------------------------------------------------

struct Result {
  int code = -1;
  std::string out, err;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string l;
  while (std::getline(ss, l)) out.push_back(l);
  return out;
}

int Invoke(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return RunClientCommand(static_cast<int>(args.size()), argv.data());
}

class ClientCommandsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const char* e : {"GPUTRAVEL_ENDPOINT", "GPUTRAVEL_CA", "GPUTRAVEL_CERT", "GPUTRAVEL_KEY",
                          "GPUTRAVEL_CRL"}) {
      unsetenv(e);
    }
    dir_ = new std::string(MakeSocketTestDir("gtcli."));
    const std::string& d = *dir_;
    ASSERT_TRUE(InitCampaignCa(d, "test-campaign", 2).ok());
    for (const Identity& id : {Identity{kRoleOrchestrator, "orchestrator"},
                               Identity{kRoleOperator, "alice"},
                               Identity{kRoleHolder, "hospital-a"}}) {
      auto issued = IssueIdentity(d, id, 1);
      ASSERT_TRUE(issued.ok()) << issued.status();
    }
    Identity orch{kRoleOrchestrator, "orchestrator"};
    auto creds = MakeServerCredentials(
        TlsFiles{CaCertPath(d), IdentityCertPath(d, orch), IdentityKeyPath(d, orch)});
    ASSERT_TRUE(creds.ok()) << creds.status();
    service_ = new FakeOrchestrator();
    endpoint_ = new std::string("unix:" + d + "/orch.sock");
    grpc::ServerBuilder b;
    b.AddListeningPort(*endpoint_, *creds);
    b.RegisterService(service_);
    server_ = b.BuildAndStart().release();
    ASSERT_NE(server_, nullptr);
  }

  static void TearDownTestSuite() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    delete server_;
    delete service_;
    if (dir_) std::filesystem::remove_all(*dir_);
    delete dir_;
    delete endpoint_;
  }

  static std::string Dir() { return *dir_; }
  static std::vector<std::string> Tls(const Identity& who = {kRoleOperator, "alice"}) {
    return {"--ca=" + CaCertPath(*dir_), "--cert=" + IdentityCertPath(*dir_, who),
            "--key=" + IdentityKeyPath(*dir_, who)};
  }

  // gputravel CMD ARGS... with --endpoint and operator TLS flags appended.
  static Result Run(std::vector<std::string> args, bool connect = true) {
    // The connection flags go first so that the test's own flags override them.
    std::vector<std::string> full = {"gputravel", args.at(0)};
    if (connect) {
      full.push_back("--endpoint=" + *endpoint_);
      for (auto& t : Tls()) full.push_back(t);
    }
    full.insert(full.end(), args.begin() + 1, args.end());
    return RunRaw(full);
  }

  static Result RunRaw(const std::vector<std::string>& args) {
    static int n = 0;
    std::string out_path = *dir_ + "/out" + std::to_string(++n);
    std::string err_path = *dir_ + "/err" + std::to_string(n);
    std::fflush(stdout);
    std::fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    int fo = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int fe = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fo, 1);
    dup2(fe, 2);
    close(fo);
    close(fe);
    Result r;
    r.code = Invoke(args);
    std::fflush(stdout);
    std::fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);
    r.out = ReadAll(out_path);
    r.err = ReadAll(err_path);
    return r;
  }

  static std::string WriteSpec(const std::string& name, const std::string& text) {
    std::string p = *dir_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }

  static std::string* dir_;
  static std::string* endpoint_;
  static FakeOrchestrator* service_;
  static grpc::Server* server_;
};

std::string* ClientCommandsTest::dir_ = nullptr;
std::string* ClientCommandsTest::endpoint_ = nullptr;
FakeOrchestrator* ClientCommandsTest::service_ = nullptr;
grpc::Server* ClientCommandsTest::server_ = nullptr;

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE((haystack).find(needle), std::string::npos) << "missing '" << (needle) << "' in:\n" << (haystack)
#define EXPECT_HASNT(haystack, needle) \
  EXPECT_EQ((haystack).find(needle), std::string::npos) << "unexpected '" << (needle) << "' in:\n" << (haystack)

json ParseOne(const Result& r) {
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not one JSON document:\n" << r.out;
  return j;
}

// --- entry points and --help ------------------------------------------------------

TEST(ClientCommands, IsClientCommandAndSummaries) {
  std::string help = ClientCommandsHelp();
  for (const char* c : {"create", "start", "pause", "resume", "cancel", "skip", "delete",
                        "status", "watch", "list", "holders", "gpus"}) {
    EXPECT_TRUE(IsClientCommand(c)) << c;
    EXPECT_HAS(help, std::string("  ") + c + " ");
  }
  EXPECT_FALSE(IsClientCommand("demo"));
  EXPECT_FALSE(IsClientCommand("pki"));
  EXPECT_FALSE(IsClientCommand(""));
  EXPECT_EQ(Lines(help).size(), 12u) << help;
}

TEST_F(ClientCommandsTest, HelpOfEveryCommandNamesEveryFlagAndExitCode) {
  const std::vector<std::string> common = {"--endpoint", "--ca",      "--cert", "--key",
                                           "--server_name", "--timeout", "--json", "--help",
                                           "GPUTRAVEL_ENDPOINT", "GPUTRAVEL_CA",
                                           "GPUTRAVEL_CERT", "GPUTRAVEL_KEY",
                                           "--crl", "GPUTRAVEL_CRL"};
  const std::map<std::string, std::vector<std::string>> own = {
      {"create", {"SPEC.json", "--request_id", "--start"}},
      {"start", {"NAME"}},
      {"pause", {"NAME"}},
      {"resume", {"NAME"}},
      {"cancel", {"NAME", "--wait"}},
      {"skip", {"CAMPAIGN HOLDER", "--reason"}},
      {"delete", {"NAME"}},
      {"status", {"NAME", "--trips"}},
      {"watch", {"NAME", "--after_seq", "--no_progress", "--until"}},
      {"list", {}},
      {"holders", {"[check]", "--campaign", "--holder_endpoint", "--name", "--domain",
                   "--dataset"}},
      {"gpus", {}},
  };
  for (const auto& [cmd, flags] : own) {
    Result r = Run({cmd, "--help"}, false);
    EXPECT_EQ(r.code, 0) << cmd;
    EXPECT_HAS(r.out, "Usage: gputravel " + cmd);
    for (const auto& f : common) EXPECT_HAS(r.out, f);
    for (const auto& f : flags) EXPECT_HAS(r.out, f);
    for (int code = 0; code <= 8; ++code) EXPECT_HAS(r.out, "\n  " + std::to_string(code) + "  ");
    // Flags that are declared but missing from this list would show up here.
    for (const auto& line : Lines(r.out)) {
      if (line.rfind("  --", 0) != 0) continue;
      std::string name = line.substr(2, line.find('=') == std::string::npos
                                            ? std::string::npos
                                            : line.find('=') - 2);
      bool known = std::find(common.begin(), common.end(), name) != common.end() ||
                   std::find(flags.begin(), flags.end(), name) != flags.end();
      EXPECT_TRUE(known) << cmd << ": undocumented flag " << name;
    }
    // --help wins over other (even bad) flags.
    EXPECT_EQ(Run({cmd, "--bogus", "--help"}, false).code, 0);
  }
}

// --- usage errors (2) -------------------------------------------------------------

TEST_F(ClientCommandsTest, UsageErrors) {
  Result r = Run({"status", "alpha", "--bogus"});
  EXPECT_EQ(r.code, 2);
  EXPECT_HAS(r.err, "gputravel status: unknown flag --bogus");

  r = Run({"status"});
  EXPECT_EQ(r.code, 2);
  EXPECT_HAS(r.err, "gputravel status: expected NAME");

  r = Run({"list", "extra"});
  EXPECT_EQ(r.code, 2);

  r = Run({"status", "alpha", "--timeout=soon"});
  EXPECT_EQ(r.code, 2);
  EXPECT_HAS(r.err, "--timeout");

  r = Run({"watch", "wdone", "--after_seq=-1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_HAS(r.err, "--after_seq");

  r = Run({"list", "--server_name=Bad Name"});
  EXPECT_EQ(r.code, 2);
  EXPECT_HAS(r.err, "--server_name");

  // A missing TLS file names its flag.
  r = Run({"list", "--ca=" + Dir() + "/nope.pem"});
  EXPECT_EQ(r.code, 2);
  EXPECT_HAS(r.err, "--ca");

  // Files that do not belong together: the CA key is not the cert's key.
  r = Run({"list", "--key=" + CaKeyPath(Dir())});
  EXPECT_EQ(r.code, 2);
  EXPECT_HAS(r.err, "gputravel list: ");
  EXPECT_HAS(r.err, "is not the private key");
}

TEST_F(ClientCommandsTest, MissingEndpointAndTlsSettingsNameFlagAndEnv) {
  Result r = RunRaw({"gputravel", "list"});
  EXPECT_EQ(r.code, 2);
  EXPECT_HAS(r.err, "gputravel list: missing --endpoint (or set GPUTRAVEL_ENDPOINT)");

  std::vector<std::string> args = {"gputravel", "gpus", "--endpoint=" + *endpoint_};
  r = RunRaw(args);
  EXPECT_EQ(r.code, 2);
  EXPECT_HAS(r.err, "missing --ca (or set GPUTRAVEL_CA)");
  args.push_back(Tls()[0]);
  r = RunRaw(args);
  EXPECT_HAS(r.err, "missing --cert (or set GPUTRAVEL_CERT)");
  args.push_back(Tls()[1]);
  r = RunRaw(args);
  EXPECT_HAS(r.err, "missing --key (or set GPUTRAVEL_KEY)");
  args.push_back(Tls()[2]);
  r = RunRaw(args);
  EXPECT_EQ(r.code, 0) << r.err;
}

// With --crl, an orchestrator whose certificate the CRL revokes is refused
// at the handshake, and the error says so.
TEST_F(ClientCommandsTest, CrlRefusesARevokedOrchestrator) {
  const std::string crl = CrlPath(Dir());
  const std::string current = *ReadFile(crl);
  Result r = Run({"gpus", "--crl=" + crl});
  EXPECT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(RevokeIdentity(Dir(), {kRoleOrchestrator, "orchestrator"}, 1).ok());
  // Keep the revoking CRL aside; the suite's other tests go on without it.
  const std::string revoking = Dir() + "/revoking-crl.pem";
  ASSERT_EQ(::rename(crl.c_str(), revoking.c_str()), 0);
  ASSERT_TRUE(WriteFile(crl, current).ok());
  r = Run({"gpus", "--crl=" + revoking});
  EXPECT_EQ(r.code, 5) << r.err;
  EXPECT_HAS(r.err, "orchestrator 'orchestrator' is revoked");
  r = Run({"gpus", "--crl=" + Dir() + "/none.pem"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_HAS(r.err, "--crl: cannot read");
}

TEST_F(ClientCommandsTest, EnvironmentGivesDefaults) {
  Identity alice{kRoleOperator, "alice"};
  setenv("GPUTRAVEL_ENDPOINT", endpoint_->c_str(), 1);
  setenv("GPUTRAVEL_CA", CaCertPath(Dir()).c_str(), 1);
  setenv("GPUTRAVEL_CERT", IdentityCertPath(Dir(), alice).c_str(), 1);
  setenv("GPUTRAVEL_KEY", IdentityKeyPath(Dir(), alice).c_str(), 1);
  Result r = RunRaw({"gputravel", "gpus"});
  Result help = RunRaw({"gputravel", "gpus", "--help"});
  // A flag still overrides the environment.
  Result dead = RunRaw({"gputravel", "gpus", "--endpoint=unix:" + Dir() + "/dead.sock"});
  for (const char* e : {"GPUTRAVEL_ENDPOINT", "GPUTRAVEL_CA", "GPUTRAVEL_CERT", "GPUTRAVEL_KEY"}) {
    unsetenv(e);
  }
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "gpu0");
  EXPECT_HAS(help.out, "(default: " + *endpoint_ + ")");
  EXPECT_EQ(dead.code, 5);
}

// --- create --------------------------------------------------------------------

TEST_F(ClientCommandsTest, CreateAndIdempotentRetry) {
  std::string spec = WriteSpec("new1.json", R"({"name": "new1", "gpu": "gpu0"})");
  Result r = Run({"create", spec, "--request_id=req-new1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "Request id: req-new1");
  EXPECT_HAS(r.out, "Created campaign 'new1'.");
  EXPECT_HAS(r.out, "CREATED");

  r = Run({"create", spec, "--request_id=req-new1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "already existed for this request id");
  EXPECT_HASNT(r.out, "Created campaign");

  // Same request id, other specification; new request id, same name.
  std::string other = WriteSpec("new1b.json", R"({"name": "new1", "gpu": "gpu1"})");
  r = Run({"create", other, "--request_id=req-new1"});
  EXPECT_EQ(r.code, 4);
  EXPECT_HAS(r.err, "gputravel create: CreateCampaign: ALREADY_EXISTS: request_id req-new1");
  r = Run({"create", spec, "--request_id=req-other"});
  EXPECT_EQ(r.code, 4);
  EXPECT_HAS(r.err, "campaign 'new1' already exists");
}

TEST_F(ClientCommandsTest, CreateMakesUpAPrintedRequestId) {
  std::string spec = WriteSpec("new2.json", R"({"name": "new2"})");
  Result r = Run({"create", spec});
  ASSERT_EQ(r.code, 0) << r.err;
  std::smatch m;
  std::regex re("Request id: ([0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12})\n");
  ASSERT_TRUE(std::regex_search(r.out, m, re)) << r.out;
  // Retrying with the printed id is safe.
  r = Run({"create", spec, "--request_id=" + m[1].str()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "already existed");
}

TEST_F(ClientCommandsTest, CreateStartJson) {
  std::string spec = WriteSpec("new3.json", R"({"name": "new3"})");
  Result r = Run({"create", spec, "--start", "--json", "--request_id=r3"});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = ParseOne(r);
  EXPECT_EQ(j["request_id"], "r3");
  EXPECT_EQ(j["created"], true);
  EXPECT_EQ(j["started"], true);
  EXPECT_EQ(j["campaign"]["name"], "new3");
  EXPECT_EQ(j["campaign"]["state"], "RUNNING");
  EXPECT_TRUE(j["campaign"].contains("bytes_provisioned")) << r.out;  // Primitive defaults.
  EXPECT_TRUE(j["campaign"].contains("spec_json")) << r.out;          // Proto field names.
}

TEST_F(ClientCommandsTest, CreateChecksSpecLocally) {
  int before = service_->create_calls();
  Result r = Run({"create", WriteSpec("bad.json", "{\"name\": \"x\",")});
  EXPECT_EQ(r.code, 2);
  EXPECT_HAS(r.err, "bad.json: invalid JSON at byte");
  r = Run({"create", WriteSpec("twice.json", "{\"name\": \"x\", \"name\": \"y\"}")});
  EXPECT_EQ(r.code, 2);
  EXPECT_HAS(r.err, "twice.json: name: appears twice in the same object");
  r = Run({"create", WriteSpec("arr.json", "[1, 2]")});
  EXPECT_EQ(r.code, 2);
  EXPECT_HAS(r.err, "must be a JSON object");
  r = Run({"create", Dir() + "/missing.json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_HAS(r.err, "missing.json");
  r = Run({"create", WriteSpec("ok.json", "{}"), "--request_id=has space"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(service_->create_calls(), before);  // Nothing was sent.

  // The server's INVALID_ARGUMENT names the field.
  r = Run({"create", WriteSpec("noname.json", R"({"gpu": "gpu0"})")});
  EXPECT_EQ(r.code, 4);
  EXPECT_HAS(r.err, "gputravel create: CreateCampaign: INVALID_ARGUMENT: spec: name: missing");
}

// --- start / pause / resume / cancel ----------------------------------------------

TEST_F(ClientCommandsTest, StartPauseResume) {
  Result r = Run({"start", "fresh"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "Started campaign 'fresh'.");
  EXPECT_HAS(r.out, "State        RUNNING");
  r = Run({"start", "fresh"});  // No-op on RUNNING.
  EXPECT_EQ(r.code, 0) << r.err;

  r = Run({"pause", "p1", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ParseOne(r)["state"], "PAUSED");
  r = Run({"pause", "p1"});
  EXPECT_EQ(r.code, 0);
  EXPECT_HAS(r.out, "Pause requested for campaign 'p1'");
  r = Run({"resume", "p1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "Resumed campaign 'p1'.");
  EXPECT_HAS(r.out, "RUNNING");
}

TEST_F(ClientCommandsTest, SkipHolderNeedsAReasonAndAPausedCampaign) {
  Result r = Run({"skip", "p1", "hospital-b"});
  EXPECT_EQ(r.code, 2);
  EXPECT_HAS(r.err, "--reason is required");
  r = Run({"skip", "p1", "hospital-b", "--reason", "gone"});  // p1 is RUNNING
  EXPECT_EQ(r.code, 4);
  EXPECT_HAS(r.err, "SkipHolder 'hospital-b' of 'p1': FAILED_PRECONDITION");
  ASSERT_EQ(Run({"pause", "p1"}).code, 0);
  r = Run({"skip", "p1", "hospital-b", "--reason", "its TD is gone"});
  Result j = Run({"skip", "p1", "hospital-c", "--reason", "gone", "--json"});
  ASSERT_EQ(Run({"resume", "p1"}).code, 0);  // p1 is RUNNING again for the other tests
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "Skipped holder 'hospital-b' of campaign 'p1'");
  ASSERT_EQ(j.code, 0) << j.err;
  const nlohmann::json c = ParseOne(j);
  EXPECT_EQ(c["state"], "PAUSED");
  bool skipped = false;
  for (const auto& h : c["holders"]) {
    skipped = skipped || (h["name"] == "hospital-c" && h["state"] == "skipped" &&
                          h["error"] == "skipped by operator: gone");
  }
  EXPECT_TRUE(skipped) << c.dump();
}

TEST_F(ClientCommandsTest, FailedPreconditionAndNotFound) {
  Result r = Run({"start", "done"});
  EXPECT_EQ(r.code, 4);
  EXPECT_HAS(r.err, "gputravel start: StartCampaign 'done': FAILED_PRECONDITION: campaign 'done' "
                    "is COMPLETED");
  EXPECT_TRUE(r.out.empty()) << r.out;
  r = Run({"resume", "done", "--json"});
  EXPECT_EQ(r.code, 4);
  EXPECT_TRUE(r.out.empty()) << r.out;
  r = Run({"cancel", "done"});
  EXPECT_EQ(r.code, 4);

  for (const char* cmd : {"start", "pause", "resume", "cancel", "status", "watch"}) {
    r = Run({cmd, "nope"});
    EXPECT_EQ(r.code, 3) << cmd << ": " << r.err;
    EXPECT_HAS(r.err, std::string("gputravel ") + cmd + ": ");
    EXPECT_HAS(r.err, "NOT_FOUND: no campaign named 'nope'");
  }
  r = Run({"holders", "--campaign=nope"});
  EXPECT_EQ(r.code, 3);
}

TEST_F(ClientCommandsTest, CancelWithoutWait) {
  Result r = Run({"cancel", "k1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "Cancel requested for campaign 'k1'");
  EXPECT_HAS(r.out, "CANCELLING");
}

TEST_F(ClientCommandsTest, CancelWaitFollowsToCancelled) {
  Result r = Run({"cancel", "c-run", "--wait"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "waiting for the trip in progress");
  EXPECT_HAS(r.out, "ABORTED");
  EXPECT_HAS(r.out, "state CANCELLED");
  EXPECT_HAS(r.out, "State        CANCELLED");
  EXPECT_HASNT(r.out, "old-event-before-cancel");  // Only what followed the cancel.

  r = Run({"cancel", "c-run2", "--wait", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = ParseOne(r);
  EXPECT_EQ(j["name"], "c-run2");
  EXPECT_EQ(j["state"], "CANCELLED");
}

// --- status / list / holders / gpus -----------------------------------------------

TEST_F(ClientCommandsTest, StatusHuman) {
  Result r = Run({"status", "alpha"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "Campaign     alpha");
  EXPECT_HAS(r.out, "State        RUNNING");
  EXPECT_HAS(r.out, "GPU          gpu0");
  EXPECT_HAS(r.out, "3 ok, 1 failed");
  EXPECT_HAS(r.out, "256.0 MiB of 1.0 GiB (25.0%)");
  EXPECT_HAS(r.out, "Last loss    0.1234");
  EXPECT_HAS(r.out, "Updated      2025-01-01T12:01:00Z");
  EXPECT_HAS(r.out, "HOLDER");
  EXPECT_HAS(r.out, "CURSOR");
  EXPECT_HAS(r.out, "64.0 MiB of 512.0 MiB");
  EXPECT_HAS(r.out, "hospital-b");
  EXPECT_HAS(r.out, "holder unreachable");
  EXPECT_HASNT(r.out, "Trips:");

  r = Run({"status", "alpha", "--trips"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "Trips:");
  for (const char* h : {"ID", "WINDOW", "STEP", "OUTCOME", "MB/S", "LOSS", "DIGEST", "SCRUB",
                        "REKEY", "ERROR"}) {
    EXPECT_HAS(r.out, h);
  }
  EXPECT_HAS(r.out, "digest mismatch");
  EXPECT_HAS(r.out, "134.2");  // 64 MiB in 0.5 s.
  EXPECT_HAS(r.out, "running");
  EXPECT_HAS(r.out, "0.2500");
}

TEST_F(ClientCommandsTest, StatusJson) {
  Result r = Run({"status", "alpha", "--json", "--trips"});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = ParseOne(r);
  EXPECT_EQ(j["name"], "alpha");
  EXPECT_EQ(j["state"], "RUNNING");
  EXPECT_EQ(j["trips_ok"], "3");  // Proto JSON: 64-bit integers as strings.
  EXPECT_EQ(j["bytes_total"], std::to_string(1024 * kMiB));
  EXPECT_EQ(j["has_loss"], true);
  EXPECT_EQ(j["error"], "");
  ASSERT_EQ(j["holders"].size(), 2u);
  EXPECT_EQ(j["holders"][1]["error"], "holder unreachable");
  ASSERT_EQ(j["trips"].size(), 3u);
  EXPECT_EQ(j["trips"][1]["outcome"], "failed");
  EXPECT_EQ(j["trips"][0]["digest_match"], true);

  r = Run({"status", "alpha", "--json"});
  j = ParseOne(r);
  EXPECT_TRUE(!j.contains("trips") || j["trips"].empty()) << r.out;
}

TEST_F(ClientCommandsTest, List) {
  Result r = Run({"list"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_GE(lines.size(), 3u);
  for (const char* h : {"NAME", "STATE", "GPU", "TRIPS OK", "FAILED", "PROGRESS", "LAST LOSS",
                        "UPDATED"}) {
    EXPECT_HAS(lines[0], h);
  }
  bool found = false;
  for (const auto& l : lines) {
    if (l.rfind("alpha ", 0) == 0) {
      found = true;
      EXPECT_HAS(l, "RUNNING");
      EXPECT_HAS(l, "25.0%");
      EXPECT_HAS(l, "0.1234");
    }
  }
  EXPECT_TRUE(found) << r.out;

  r = Run({"list", "--json"});
  ASSERT_EQ(r.code, 0);
  json j = ParseOne(r);
  ASSERT_TRUE(j["campaigns"].is_array());
  EXPECT_GE(j["campaigns"].size(), 10u);
}

TEST_F(ClientCommandsTest, HoldersAndGpus) {
  Result r = Run({"holders", "--campaign", "alpha"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "CAMPAIGN");
  EXPECT_HAS(r.out, "hospital-a");
  EXPECT_HAS(r.out, "unix:/run/hospital-a.sock");
  EXPECT_HAS(r.out, "holder unreachable");
  EXPECT_EQ(Lines(r.out).size(), 3u) << r.out;

  r = Run({"holders", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = ParseOne(r);
  ASSERT_EQ(j["holders"].size(), 2u);
  EXPECT_EQ(j["holders"][0]["cursor_offset"], std::to_string(64 * kMiB));

  r = Run({"gpus"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HAS(r.out, "gpu0");
  EXPECT_HAS(r.out, "H100-SN-0001");
  EXPECT_HAS(r.out, "(idle)");
  r = Run({"gpus", "--json"});
  j = ParseOne(r);
  ASSERT_EQ(j["gpus"].size(), 2u);
  EXPECT_EQ(j["gpus"][0]["campaign"], "alpha");
  EXPECT_EQ(j["gpus"][1]["campaign"], "");
}

// --- watch -----------------------------------------------------------------------

TEST_F(ClientCommandsTest, WatchHumanCompleted) {
  Result r = Run({"watch", "wdone"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  // 9 recorded events and the summary; the live PROGRESS events are bars only.
  ASSERT_EQ(lines.size(), 10u) << r.out;
  EXPECT_HAS(lines[0], "2025-01-01T12:00:01.000Z");
  EXPECT_HAS(lines[0], "CAMPAIGN_STATE");
  EXPECT_HAS(lines[0], "state RUNNING");
  EXPECT_HAS(lines[1], "trip 1");
  EXPECT_HAS(lines[1], "hospital-a");
  EXPECT_HAS(lines[1], "TRIP_STARTED");
  EXPECT_HAS(lines[1], "PLANNED");
  EXPECT_HAS(lines[4], "PROVISIONED");
  EXPECT_HAS(lines[4], "64.0 MiB");
  EXPECT_HAS(lines[5], "loss=0.5000");
  EXPECT_HAS(lines[8], "state COMPLETED");
  EXPECT_HAS(lines[9], "Campaign 'wdone' COMPLETED");
  EXPECT_HASNT(r.out, "PROGRESS");
  // Not a terminal: no carriage returns or escape sequences.
  EXPECT_HASNT(r.out, "\r");
  EXPECT_HASNT(r.out, "\033");
  EXPECT_HASNT(r.err, "\r");

  r = Run({"watch", "wdone", "--after_seq=5"});
  ASSERT_EQ(r.code, 0) << r.err;
  lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 5u) << r.out;
  EXPECT_HAS(lines[0], "TRAINED");
}

TEST_F(ClientCommandsTest, WatchJsonLines) {
  Result r = Run({"watch", "wdone", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 12u) << r.out;  // Every event, the 3 PROGRESS included.
  int progress = 0;
  for (const auto& l : lines) {
    json j = json::parse(l, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << l;
    EXPECT_EQ(j["campaign"], "wdone");
    for (const char* f : {"seq", "kind", "trip", "holder", "step", "campaign_state", "message",
                          "bytes", "total_bytes", "loss", "time_unix_ms"}) {
      EXPECT_TRUE(j.contains(f)) << f << " in " << l;
    }
    if (j["kind"] == "PROGRESS") {
      ++progress;
      EXPECT_EQ(j["seq"], "0");
      EXPECT_EQ(j["total_bytes"], std::to_string(64 * kMiB));
    }
  }
  EXPECT_EQ(progress, 3);
  EXPECT_EQ(json::parse(lines.back())["campaign_state"], "COMPLETED");
}

TEST_F(ClientCommandsTest, WatchFailedAndCancelledExitCodes) {
  Result r = Run({"watch", "wfail"});
  EXPECT_EQ(r.code, 1);
  EXPECT_HAS(r.out, "state FAILED");
  EXPECT_HAS(r.err, "gputravel watch: campaign 'wfail' FAILED: holder hospital-b failed 3 times");

  r = Run({"watch", "wfail", "--json"});
  EXPECT_EQ(r.code, 1);

  r = Run({"watch", "wcancel", "--no_progress"});
  EXPECT_EQ(r.code, 7);
  EXPECT_HAS(r.out, "Campaign 'wcancel' CANCELLED");

  r = Run({"watch", "wcancel", "--json"});
  EXPECT_EQ(r.code, 7);

  // Stream broken by the server: UNAVAILABLE, with a way to continue.
  r = Run({"watch", "wbroken"});
  EXPECT_EQ(r.code, 5);
  EXPECT_HAS(r.err, "orchestrator shutting down");
  EXPECT_HAS(r.err, "--after_seq=1");  // The last event it received.
}

// Runs `gputravel ARGS...` with stdout on a pseudo-terminal 100 columns wide;
// returns the exit code and everything written to the terminal.
std::pair<int, std::string> RunOnTerminal(const std::vector<std::string>& args,
                                          const std::string& err_path) {
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  EXPECT_GE(master, 0);
  EXPECT_EQ(grantpt(master), 0);
  EXPECT_EQ(unlockpt(master), 0);
  int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
  EXPECT_GE(slave, 0);
  struct termios tio;
  tcgetattr(slave, &tio);
  cfmakeraw(&tio);  // No "\n" -> "\r\n" translation.
  tcsetattr(slave, TCSANOW, &tio);
  struct winsize ws {};
  ws.ws_col = 100;
  ws.ws_row = 40;
  ioctl(slave, TIOCSWINSZ, &ws);

  std::string tty;
  std::thread reader([&] {
    char buf[4096];
    for (;;) {
      ssize_t n = read(master, buf, sizeof(buf));
      if (n <= 0) break;
      tty.append(buf, n);
    }
  });
  std::fflush(stdout);
  std::fflush(stderr);
  int saved_out = dup(1), saved_err = dup(2);
  int fe = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(slave, 1);
  dup2(fe, 2);
  close(fe);
  int code = Invoke(args);
  std::fflush(stdout);
  std::fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  close(slave);  // The reader sees EOF/EIO once no slave descriptor is left.
  reader.join();
  close(master);
  return {code, tty};
}

// A terminal on stdout: the bars are drawn and redrawn in place.
TEST_F(ClientCommandsTest, WatchDrawsProgressBarsOnATerminal) {
  std::vector<std::string> args = {"gputravel", "watch", "wdone", "--endpoint=" + *endpoint_};
  for (auto& t : Tls()) args.push_back(t);
  auto [code, tty] = RunOnTerminal(args, Dir() + "/tty-err");
  EXPECT_EQ(code, 0) << ReadAll(Dir() + "/tty-err");
  EXPECT_HAS(tty, "\r\033[K");
  EXPECT_HAS(tty, "trip 1 hospital-a 64.0 MiB/64.0 MiB [");
  EXPECT_HAS(tty, "100.0%");
  EXPECT_HAS(tty, "campaign wdone ");
  EXPECT_HAS(tty, "TRIP_FINISHED");
  EXPECT_HAS(tty, "Campaign 'wdone' COMPLETED");
  // No bar is wider than the terminal.
  std::string plain;
  for (size_t i = 0; i < tty.size(); ++i) {
    if (tty[i] == '\033') {
      while (i < tty.size() && !isalpha(static_cast<unsigned char>(tty[i]))) ++i;
      plain += '\n';
      continue;
    }
    plain += tty[i] == '\r' ? '\n' : tty[i];
  }
  int bars = 0;
  for (const auto& l : Lines(plain)) {
    if (l.find(" [#") == std::string::npos && l.find(" [-") == std::string::npos) continue;
    ++bars;
    EXPECT_LE(l.size(), 100u) << l;
  }
  EXPECT_GE(bars, 2);

  // --no_progress: the same event lines, nothing redrawn.
  args.push_back("--no_progress");
  auto [code2, plain_tty] = RunOnTerminal(args, Dir() + "/tty-err2");
  EXPECT_EQ(code2, 0);
  EXPECT_HASNT(plain_tty, "\r");
  EXPECT_HASNT(plain_tty, "\033");
  EXPECT_HAS(plain_tty, "TRIP_FINISHED");
  EXPECT_EQ(Lines(plain_tty).size(), 10u) << plain_tty;
}

// --- transport and authorization errors ---------------------------------------------

TEST_F(ClientCommandsTest, UnreachableOrchestrator) {
  std::string dead = "unix:" + Dir() + "/dead.sock";
  std::vector<std::string> args = {"gputravel", "list", "--endpoint=" + dead, "--timeout=5"};
  for (auto& t : Tls()) args.push_back(t);
  Result r = RunRaw(args);
  EXPECT_EQ(r.code, 5);
  EXPECT_HAS(r.err, "gputravel list: cannot reach the orchestrator at " + dead);
  EXPECT_HAS(r.err, "UNAVAILABLE");

  // create tells how to retry without creating the campaign twice.
  args = {"gputravel", "create", WriteSpec("d.json", R"({"name":"d"})"), "--request_id=rid-7",
          "--endpoint=" + dead};
  for (auto& t : Tls()) args.push_back(t);
  r = RunRaw(args);
  EXPECT_EQ(r.code, 5);
  EXPECT_HAS(r.err, "retry with --request_id=rid-7");

  // A server that is not orchestrator/NAME is refused by the client.
  r = Run({"list", "--server_name=other"});
  EXPECT_EQ(r.code, 5) << r.err;
}

TEST_F(ClientCommandsTest, DeadlineExceeded) {
  Result r = Run({"status", "slow", "--timeout=0.3"});
  EXPECT_EQ(r.code, 5);
  EXPECT_HAS(r.err, "did not answer");
  EXPECT_HAS(r.err, "DEADLINE_EXCEEDED");
}

TEST_F(ClientCommandsTest, PermissionDeniedAndUnauthenticated) {
  // A holder certificate of the same CA: the fake authorizes like the real one.
  std::vector<std::string> args = {"gputravel", "list", "--endpoint=" + *endpoint_};
  for (auto& t : Tls({kRoleHolder, "hospital-a"})) args.push_back(t);
  Result r = RunRaw(args);
  EXPECT_EQ(r.code, 6);
  EXPECT_HAS(r.err, "PERMISSION_DENIED");
  EXPECT_HAS(r.err, "holder 'hospital-a'");

  r = Run({"status", "unauth"});
  EXPECT_EQ(r.code, 6);
  EXPECT_HAS(r.err, "UNAUTHENTICATED: certificate revoked");
  r = Run({"watch", "unauth"});
  EXPECT_EQ(r.code, 6);
}

TEST_F(ClientCommandsTest, ServerErrorIsOne) {
  Result r = Run({"status", "broken"});
  EXPECT_EQ(r.code, 1);
  EXPECT_HAS(r.err, "gputravel status: GetCampaign 'broken': INTERNAL: database is locked");
  r = Run({"pause", "broken", "--json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(r.out.empty());
}

TEST_F(ClientCommandsTest, ServerTextNeverReachesTheTerminalRaw) {
  Result r = Run({"status", "evil", "--trips"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HASNT(r.out, '\x1b');
  EXPECT_HASNT(r.out, '\x07');
  EXPECT_HASNT(r.out, "\nFAKE LINE");
  EXPECT_HAS(r.out, "boom\\x1b[2J\\x1b]0;pwned\\x07");
  EXPECT_HAS(r.out, "h\\x1b[31m");
  EXPECT_HAS(r.out, "x\\x1b[1A\\x0d\\x0aFAKE LINE");
  // JSON carries the text itself (the JSON encoder escapes it).
  r = Run({"status", "evil", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_HASNT(r.out, '\x1b');
  EXPECT_EQ(ParseOne(r)["error"], "boom\x1b[2J\x1b]0;pwned\x07");

  r = Run({"watch", "evil-watch", "--no_progress"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_HASNT(r.out, '\x1b');
  EXPECT_HASNT(r.err, '\x1b');
  EXPECT_HAS(r.out, "oops\\x1b[2K");
  EXPECT_HAS(r.err, "FAILED: boom\\x1b[2J");

  // The server's own error message.
  r = Run({"status", "no\x1b[2Jsuch"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_HASNT(r.err, '\x1b');
  EXPECT_HAS(r.err, "no campaign named 'no\\x1b[2Jsuch'");
}

}  // namespace
}  // namespace gputravel
