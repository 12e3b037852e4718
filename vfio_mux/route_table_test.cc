#include "vfio_mux/route_table.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <future>
#include <map>
#include <random>
#include <thread>
#include <sstream>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "util/files.h"
#include "util/test_dir.h"
#include "vfio_mux/mux_policy.h"

namespace gputravel {
namespace {

// Records moves; fails on demand.
class FakeBackend : public RoutingBackend {
 public:
  std::string Name() const override { return "fake"; }
  absl::StatusOr<std::vector<GpuDevice>> ListGpus() override {
    return std::vector<GpuDevice>{{"gpu0", "", "", ""}, {"gpu1", "", "", ""}};
  }
  absl::Status Move(const std::string& gpu, const std::string& from,
                    const std::string& to) override {
    if (gate != nullptr && gpu == "gpu0") {
      entered.Notify();
      gate->WaitForNotification();
    }
    if (fail) return absl::UnavailableError("backend down");
    moves.push_back(from + ">" + to);
    owner[gpu] = to;
    if (apply_then_fail) return absl::DeadlineExceededError("moved, but the reply was lost");
    return absl::OkStatus();
  }
  absl::Status Reset(const std::string&) override {
    ++resets;
    return absl::OkStatus();
  }
  std::vector<std::string> moves;
  std::map<std::string, std::string> owner;  // where the GPU really is
  int resets = 0;
  bool fail = false;
  bool apply_then_fail = false;  // the move happens, its reply is an error
  // When set, a move of gpu0 notifies `entered` and waits for the gate.
  absl::Notification* gate = nullptr;
  absl::Notification entered;
};

class RouteTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("gputravel-rt-");
  }
  void TearDown() override { (void)system(("rm -rf " + dir_).c_str()); }
  std::string State() const { return dir_ + "/state.json"; }
  std::string Audit() const { return dir_ + "/audit.log"; }
  absl::StatusOr<std::unique_ptr<RouteTable>> TryOpen() {
    RouteTableOptions o;
    o.sync = [this](int fd) {
      ++syncs_;
      if (fail_sync_) {
        errno = EIO;
        return -1;
      }
      return ::fdatasync(fd);
    };
    o.domains = {"orch",     "holder-a", "holder-b", "holder-c", "holder-d",
                 "holder-x", "holder-y", "holder-z", "td-b"};
    return RouteTable::Open(&backend_, State(), Audit(), o);
  }
  // Destroying the table without Close() is what a crash leaves: no final
  // snapshot, only the journal.
  std::unique_ptr<RouteTable> Open() {
    auto t = TryOpen();
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? std::move(*t) : nullptr;
  }
  std::vector<std::string> AuditLines() {
    std::vector<std::string> out;
    std::istringstream in(*ReadFile(Audit()));
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  // Whether the audit log has an accepted line with `token` (and with
  // `action` and `to`, where not empty).
  bool HasAcceptedLine(const std::string& action, const std::string& to, uint64_t token) {
    for (const std::string& l : AuditLines()) {
      auto j = nlohmann::json::parse(l, nullptr, false);
      if (!j.is_discarded() && j.value("token", uint64_t{0}) == token &&
          j.value("result", "") == "ok" && (action.empty() || j.value("action", "") == action) &&
          (to.empty() || j.value("to", "") == to)) {
        return true;
      }
    }
    return false;
  }
  // Runs `decide` while the audit log cannot grow: its next append fails
  // (EFBIG, as ENOSPC would) and the partial line is taken back.
  template <typename Decide>
  auto WithAuditLogFull(Decide decide) {
    struct stat st;
    EXPECT_EQ(::stat(Audit().c_str(), &st), 0);
    struct rlimit saved;
    EXPECT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
    auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit full = saved;
    full.rlim_cur = static_cast<rlim_t>(st.st_size) + audit_room_;
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &full), 0);
    auto result = decide();
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
    ::signal(SIGXFSZ, old_handler);
    return result;
  }
  std::string dir_;
  FakeBackend backend_;
  int syncs_ = 0;
  bool fail_sync_ = false;
  // Bytes WithAuditLogFull still lets the audit log grow by: a line longer
  // than this is written in part, then fails.
  rlim_t audit_room_ = 0;
};

TEST_F(RouteTableTest, RoutesAndReportsOwner) {
  auto t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 1).ok());
  EXPECT_EQ(t->Get("gpu0")->domain, "holder-a");
  ASSERT_TRUE(t->RouteTo("gpu0", "orch", 1).ok());  // same token: route back
  EXPECT_EQ(backend_.moves, (std::vector<std::string>{">holder-a", "holder-a>orch"}));
}

TEST_F(RouteTableTest, StaleTokenRefused) {
  auto t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 5).ok());
  auto st = t->RouteTo("gpu0", "holder-b", 4);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.status().message().find("stale fencing token 4"), std::string::npos);
  EXPECT_TRUE(IsFencingRefusal(st.status()));
  EXPECT_EQ(t->Get("gpu0")->domain, "holder-a");
  EXPECT_TRUE(IsFencingRefusal(t->Reset("gpu0", 3)));
  // Other refusals are not fencing ones.
  EXPECT_FALSE(IsFencingRefusal(t->RouteTo("gpu9", "holder-a", 6).status()));
  EXPECT_FALSE(IsFencingRefusal(t->RouteTo("gpu0", "nowhere", 6).status()));
}

// One route with a token far ahead (2^64-1 from a compromised or buggy
// orchestrator) would make every later token stale for good: it is refused
// before any work, leaves no journal line, and the GPU stays routable with
// the tokens that follow the last accepted one. The bound is
// kMaxFencingTokenStep above the last accepted, and never above int64's
// largest (the orchestrator's counter).
TEST_F(RouteTableTest, TokenFarAheadIsRefusedAndCannotWedgeTheGpu) {
  auto t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 5).ok());
  const size_t lines = AuditLines().size();
  for (uint64_t bad : {~uint64_t{0}, kMaxFencingToken + 1, 5 + kMaxFencingTokenStep + 1}) {
    SCOPED_TRACE(bad);
    auto r = t->RouteTo("gpu0", "orch", bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange) << r.status();
    EXPECT_TRUE(IsForCaller(r.status()));
    EXPECT_TRUE(IsFencingRefusal(r.status()));
    EXPECT_NE(r.status().message().find("too far ahead of the last accepted token 5"),
              std::string::npos) << r.status();
    EXPECT_EQ(t->Reset("gpu0", bad).code(), absl::StatusCode::kOutOfRange);
  }
  EXPECT_EQ(AuditLines().size(), lines);
  EXPECT_EQ(backend_.moves, (std::vector<std::string>{">holder-a"}));
  EXPECT_EQ(backend_.resets, 0);
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 5u);
  // The next token still works, and so does the largest step allowed.
  ASSERT_TRUE(t->RouteTo("gpu0", "orch", 6).ok());
  ASSERT_TRUE(t->RouteTo("gpu0", "holder-b", 6 + kMaxFencingTokenStep).ok());
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 6 + kMaxFencingTokenStep);
}

// A journal restored or rotated with a loose mode, and a snapshot's
// leftover temporary file, are made 0600 when the table opens them.
TEST_F(RouteTableTest, JournalAndSnapshotAre0600WhateverExistedBefore) {
  ASSERT_TRUE(WriteFile(Audit(), "", 0644).ok());
  ASSERT_TRUE(WriteFile(State() + ".tmp", "", 0644).ok());
  ASSERT_EQ(::chmod(Audit().c_str(), 0644), 0);
  ASSERT_EQ(::chmod((State() + ".tmp").c_str(), 0666), 0);
  auto t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 1).ok());
  for (const std::string& path : {Audit(), State()}) {
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << path;
  }
}

TEST_F(RouteTableTest, RestartRemembersOwnerAndToken) {
  {
    auto t = Open();
    ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 9).ok());
  }
  auto t = Open();
  EXPECT_EQ(t->Get("gpu0")->domain, "holder-a");
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 9u);
  EXPECT_FALSE(t->RouteTo("gpu0", "orch", 8).ok());
}

// The snapshot is written at start-up only; what follows it is recovered from
// the journal (the audit log).
TEST_F(RouteTableTest, RestartRecoversEveryGpuFromTheJournal) {
  std::string snapshot;
  {
    auto t = Open();
    snapshot = *ReadFile(State());
    ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 3).ok());
    ASSERT_TRUE(t->RouteTo("gpu1", "holder-b", 4).ok());
    ASSERT_TRUE(t->RouteTo("gpu0", "orch", 3).ok());
    ASSERT_TRUE(t->Reset("gpu0", 6).ok());
    ASSERT_TRUE(t->RouteTo("gpu1", "holder-c", 7).ok());
    EXPECT_FALSE(t->RouteTo("gpu1", "holder-x", 5).ok());  // refused: not replayed
    backend_.fail = true;
    EXPECT_FALSE(t->RouteTo("gpu1", "holder-y", 8).ok());  // failed: not replayed
    backend_.fail = false;
    EXPECT_EQ(*ReadFile(State()), snapshot) << "the snapshot was rewritten by a decision";
  }
  auto t = Open();
  EXPECT_EQ(t->Get("gpu0")->domain, "orch");
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 6u);
  EXPECT_EQ(t->Get("gpu1")->domain, "holder-c");
  EXPECT_EQ(t->Get("gpu1")->fencing_token, 7u);
  auto stale = t->RouteTo("gpu1", "holder-z", 6);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(stale.status().message().find("token 7 was already accepted"), std::string::npos)
      << stale.status();
  EXPECT_EQ(t->Reset("gpu0", 5).code(), absl::StatusCode::kFailedPrecondition);
  // The start-up snapshot now covers the journal: a second restart replays
  // only what follows it, and still agrees.
  ASSERT_TRUE(t->RouteTo("gpu0", "holder-d", 9).ok());
  t.reset();
  t = Open();
  EXPECT_EQ(t->Get("gpu0")->domain, "holder-d");
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 9u);
  EXPECT_EQ(t->Get("gpu1")->fencing_token, 7u);
}

// The state file lost: the whole journal is replayed.
TEST_F(RouteTableTest, LostSnapshotIsRebuiltFromTheWholeJournal) {
  {
    auto t = Open();
    ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 3).ok());
  }
  {
    auto t = Open();  // takes a snapshot covering token 3
    ASSERT_TRUE(t->RouteTo("gpu0", "holder-b", 4).ok());
  }
  ASSERT_EQ(::unlink(State().c_str()), 0);
  auto t = Open();
  EXPECT_EQ(t->Get("gpu0")->domain, "holder-b");
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 4u);
}

// A crash while the last line is being written, cut at every byte: start-up
// succeeds, the torn line is dropped (it was never answered), and the rest
// holds.
TEST_F(RouteTableTest, TornLastLineToleratedAtEveryByte) {
  {
    auto t = Open();
    ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 1).ok());
    ASSERT_TRUE(t->RouteTo("gpu0", "holder-b", 2).ok());
  }
  const std::string state = *ReadFile(State());
  const std::string journal = *ReadFile(Audit());
  ASSERT_EQ(journal.back(), '\n');
  const size_t last = journal.rfind('\n', journal.size() - 2) + 1;
  for (size_t cut = last; cut <= journal.size(); ++cut) {
    SCOPED_TRACE("journal cut at byte " + std::to_string(cut));
    ASSERT_TRUE(WriteFile(State(), state).ok());
    ASSERT_TRUE(WriteFile(Audit(), journal.substr(0, cut)).ok());
    auto t = Open();
    ASSERT_TRUE(t);
    const bool whole = cut >= journal.size() - 1;  // all but, at most, the newline
    if (cut == journal.size()) {
      EXPECT_EQ(t->Get("gpu0")->domain, "holder-b");
      EXPECT_EQ(t->Get("gpu0")->fencing_token, 2u);
    } else {
      EXPECT_EQ(t->Get("gpu0")->domain, "holder-a") << (whole ? "(only the newline torn)" : "");
      EXPECT_EQ(t->Get("gpu0")->fencing_token, 1u);
    }
    // The torn bytes were cut, so the next line starts on its own line and a
    // second restart reads it back.
    ASSERT_TRUE(t->RouteTo("gpu0", "holder-c", 5).ok());
    t.reset();
    t = Open();
    ASSERT_TRUE(t);
    EXPECT_EQ(t->Get("gpu0")->domain, "holder-c");
    EXPECT_EQ(t->Get("gpu0")->fencing_token, 5u);
    for (const auto& l : AuditLines()) {
      EXPECT_FALSE(nlohmann::json::parse(l, nullptr, false).is_discarded()) << l;
    }
  }
}

// Garbage (zeros, say) where the last write was: dropped as torn.
TEST_F(RouteTableTest, ZeroFilledTailTolerated) {
  {
    auto t = Open();
    ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 1).ok());
  }
  std::string journal = *ReadFile(Audit());
  ASSERT_TRUE(WriteFile(Audit(), journal + std::string(100, '\0')).ok());
  auto t = Open();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 1u);
  EXPECT_EQ(*ReadFile(Audit()), journal);
}

TEST_F(RouteTableTest, CorruptLineBeforeTheLastRefused) {
  {
    auto t = Open();
    ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 1).ok());
    ASSERT_TRUE(t->RouteTo("gpu0", "holder-b", 2).ok());
  }
  std::string journal = *ReadFile(Audit());
  journal[journal.find('\n') - 3] = '#';  // damage the first line
  ASSERT_TRUE(WriteFile(Audit(), journal).ok());
  auto t = TryOpen();
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(t.status().message().find("is not a MUX decision"), std::string::npos)
      << t.status();
  EXPECT_NE(t.status().message().find(Audit()), std::string::npos) << t.status();
}

// A route costs one flush, whatever the decision; the snapshot is not
// rewritten.
TEST_F(RouteTableTest, OneSyncPerDecision) {
  auto t = Open();
  const std::string snapshot = *ReadFile(State());
  auto count = [&](const std::function<void()>& f) {
    int before = syncs_;
    f();
    return syncs_ - before;
  };
  EXPECT_EQ(count([&] { ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 1).ok()); }), 1);
  EXPECT_EQ(count([&] { ASSERT_TRUE(t->RouteTo("gpu0", "orch", 1).ok()); }), 1);
  EXPECT_EQ(count([&] { ASSERT_TRUE(t->RouteTo("gpu0", "orch", 2).ok()); }), 1);  // no move
  EXPECT_EQ(count([&] { ASSERT_FALSE(t->RouteTo("gpu0", "holder-b", 1).ok()); }), 0);
  backend_.fail = true;
  EXPECT_EQ(count([&] { ASSERT_FALSE(t->RouteTo("gpu0", "holder-b", 3).ok()); }), 1);
  backend_.fail = false;
  EXPECT_EQ(count([&] { ASSERT_TRUE(t->Reset("gpu0", 3).ok()); }), 1);
  EXPECT_EQ(count([&] { ASSERT_FALSE(t->RouteTo("gpu9", "orch", 9).ok()); }), 0);  // unknown
  EXPECT_EQ(count([&] { ASSERT_FALSE(t->RouteTo("gpu0", "elsewhere", 9).ok()); }), 0);
  EXPECT_EQ(*ReadFile(State()), snapshot);
  EXPECT_EQ(AuditLines().size(), 5u);
}

// Attempts are journaled; requests refused before any work (stale token,
// unknown GPU, unconfigured domain, bad name) are not: a caller cannot grow
// the journal, or force a flush, without moving the GPU.
TEST_F(RouteTableTest, AttemptsAreJournaledRefusalsAreNot) {
  auto t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 2).ok());
  (void)t->RouteTo("gpu0", "holder-b", 1);
  (void)t->RouteTo("gpu0", "not-configured", 3);
  (void)t->RouteTo("gpu7", "holder-b", 3);
  (void)t->Reset("gpu0", 1);
  auto log = *ReadFile(Audit());
  EXPECT_NE(log.find("\"to\":\"holder-a\""), std::string::npos);
  EXPECT_EQ(log.find("stale fencing token 1"), std::string::npos);
  // The line format operators and bench/trip_bench.cc read.
  auto lines = AuditLines();
  ASSERT_EQ(lines.size(), 1u);
  auto j = nlohmann::json::parse(lines[0], nullptr, false);
  ASSERT_TRUE(j.is_object()) << lines[0];
  EXPECT_TRUE(j["time"].is_number_float());
  EXPECT_EQ(j["action"], "route");
  EXPECT_EQ(j["gpu"], "gpu0");
  EXPECT_EQ(j["from"], "");
  EXPECT_EQ(j["to"], "holder-a");
  EXPECT_EQ(j["token"], 2u);
  EXPECT_EQ(j["result"], "ok");
  EXPECT_EQ(j.size(), 7u);
}

TEST_F(RouteTableTest, BackendFailureLeavesRouteUnchanged) {
  auto t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 1).ok());
  backend_.fail = true;
  EXPECT_FALSE(t->RouteTo("gpu0", "holder-b", 2).ok());
  EXPECT_EQ(t->Get("gpu0")->domain, "holder-a");
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 1u);
}

// A move that took effect but was reported failed leaves the table behind
// the GPU; routing home must still reach the backend, which puts it there,
// instead of answering "already home" while a holder has it.
TEST_F(RouteTableTest, RouteToTheDomainTheTableNamesStillMovesTheGpu) {
  auto t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "orch", 1).ok());
  backend_.apply_then_fail = true;
  EXPECT_FALSE(t->RouteTo("gpu0", "holder-a", 2).ok());
  EXPECT_EQ(t->Get("gpu0")->domain, "orch");  // what was confirmed
  EXPECT_EQ(backend_.owner["gpu0"], "holder-a");  // where it really is
  backend_.apply_then_fail = false;
  ASSERT_TRUE(t->RouteTo("gpu0", "orch", 3).ok());
  EXPECT_EQ(backend_.owner["gpu0"], "orch");
  EXPECT_EQ(backend_.moves.back(), "orch>orch");
  // The same after a restart (the journal has no line for a move the MUX
  // never answered, as after a crash between the move and its line).
  backend_.apply_then_fail = true;
  EXPECT_FALSE(t->RouteTo("gpu0", "holder-b", 4).ok());
  t.reset();
  backend_.apply_then_fail = false;
  t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "orch", 5).ok());
  EXPECT_EQ(backend_.owner["gpu0"], "orch");
}

// The caller learns that its GPU is unknown, not which GPUs the host has.
TEST_F(RouteTableTest, UnknownGpuNamesNoOtherGpu) {
  auto t = Open();
  auto st = t->RouteTo("gpu9", "orch", 1);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(st.status().message().find("gpu9"), std::string::npos);
  EXPECT_EQ(st.status().message().find("gpu0"), std::string::npos) << st.status();
  EXPECT_EQ(st.status().message().find("gpu1"), std::string::npos) << st.status();
  EXPECT_TRUE(IsForCaller(st.status()));
}

// P8: a domain the administrator did not configure never reaches the
// backend, whatever the caller's token, and every such domain gets the same
// answer (no way to tell a VM that exists from one that does not).
TEST_F(RouteTableTest, UnconfiguredDomainNeverReachesTheBackend) {
  auto t = Open();
  auto a = t->RouteTo("gpu0", "other-tenant-vm", 100);
  auto b = t->RouteTo("gpu0", "no-such-vm", 100);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kPermissionDenied);
  std::string ma(a.status().message()), mb(b.status().message());
  ma.replace(ma.find("other-tenant-vm"), 15, "X");
  mb.replace(mb.find("no-such-vm"), 10, "X");
  EXPECT_EQ(ma, mb);
  EXPECT_TRUE(backend_.moves.empty());
  EXPECT_TRUE(AuditLines().empty());
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 0u);  // the token was not taken either
}

// A huge or strange name is refused before the lock, the backend and the
// journal; after a crash the journal replays as always.
TEST_F(RouteTableTest, OversizedOrOddNamesAreRefusedAndTheJournalStillReplays) {
  {
    auto t = Open();
    ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 1).ok());
    for (const std::string& bad :
         {std::string(3 << 20, 'a'), std::string("holder-a\n{\"forged\":1}"),
          std::string("-x"), std::string("a/b"), std::string(64, 'b')}) {
      auto r = t->RouteTo("gpu0", bad, 2);
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
      EXPECT_LT(r.status().message().size(), 400u);
      EXPECT_EQ(std::string(r.status().message()).find('\n'), std::string::npos);
      EXPECT_EQ(t->RouteTo(bad, "orch", 2).status().code(),
                absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(t->Reset(bad, 2).code(), absl::StatusCode::kInvalidArgument);
    }
    EXPECT_EQ(AuditLines().size(), 1u);
  }  // a crash: no Close
  auto t = TryOpen();
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->Get("gpu0")->domain, "holder-a");
}

// A backend's error text, however long, makes a bounded journal line.
TEST_F(RouteTableTest, LongBackendErrorsMakeBoundedJournalLines) {
  class Verbose : public FakeBackend {
    absl::Status Move(const std::string&, const std::string&, const std::string&) override {
      return absl::InternalError(std::string(2 << 20, 'e'));
    }
  };
  Verbose verbose;
  RouteTableOptions o;
  o.domains = {"orch"};
  {
    auto t = RouteTable::Open(&verbose, State(), Audit(), o);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_FALSE((*t)->RouteTo("gpu0", "orch", 1).ok());
    auto lines = AuditLines();
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_LT(lines[0].size(), 2048u);
  }
  auto t = RouteTable::Open(&verbose, State(), Audit(), o);
  EXPECT_TRUE(t.ok()) << t.status();
}

// ATTACK (P8, disk): the pinned orchestrator (the tenant's) can grow the
// root-owned journal on the provider's disk without bound: a route to where
// the GPU already is, a route from "" to "" (the libvirt backend answers it
// without a libvirt call) or a move the backend refuses before touching
// anything (domain not running, GPU attached elsewhere) each appends and
// fdatasyncs a line, with no rate limit and no compaction while the MUX
// runs (the journal may only be rotated while it is stopped). Thousands of
// lines a second fill /var/log; then appends fail, and with StateDirectory
// on the same file system Open cannot write its snapshot, so the MUX cannot
// even restart. Secure: the MUX bounds its own journal (compacts it into a
// snapshot, or does not journal decisions that changed nothing).
TEST_F(RouteTableTest, RepeatedNoOpDecisionsDoNotGrowTheJournalWithoutBound) {
  RouteTableOptions o;
  o.sync = [](int) { return 0; };
  o.domains = {"holder-a"};
  auto t = RouteTable::Open(&backend_, State(), Audit(), o);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE((*t)->RouteTo("gpu0", "holder-a", 1).ok());
  for (int i = 0; i < 5000; ++i) {
    ASSERT_TRUE((*t)->RouteTo("gpu0", "holder-a", 1).ok());  // already there
    ASSERT_TRUE((*t)->RouteTo("gpu1", "", 1).ok());          // unrouted to unrouted
  }
  backend_.fail = true;  // refused by the backend before anything moved
  for (int i = 0; i < 5000; ++i) (void)(*t)->RouteTo("gpu1", "holder-a", 1);
  const size_t journal = ReadFile(Audit())->size();
  EXPECT_LT(journal, size_t{512} << 10)
      << "15000 decisions that changed nothing left a " << journal
      << "-byte journal; a caller can fill the host's disk at this rate";
}

// Decisions that each raise the token must all be durable; the journal is
// compacted instead (a snapshot, the old journal as AUDIT.1, a new one), and
// a crash afterwards replays to the same table.
TEST_F(RouteTableTest, JournalIsCompactedWhileRunningAndStillReplays) {
  auto open = [&](uint64_t max_bytes) {
    RouteTableOptions o;
    o.sync = [](int) { return 0; };
    o.domains = {"holder-a", "holder-b"};
    o.journal_max_bytes = max_bytes;
    return RouteTable::Open(&backend_, State(), Audit(), o);
  };
  {
    auto t = open(4096);
    ASSERT_TRUE(t.ok()) << t.status();
    for (uint64_t token = 1; token <= 2000; ++token) {
      ASSERT_TRUE((*t)->RouteTo("gpu0", token % 2 ? "holder-a" : "holder-b", token).ok());
    }
    ASSERT_TRUE((*t)->RouteTo("gpu1", "holder-a", 7).ok());
    EXPECT_LT(ReadFile(Audit())->size(), size_t{4096} + 1024);
    EXPECT_LT(ReadFile(Audit() + ".1")->size(), size_t{4096} + 1024);
  }  // no Close: a crash
  auto t = open(4096);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->Get("gpu0")->domain, "holder-b");
  EXPECT_EQ((*t)->Get("gpu0")->fencing_token, 2000u);
  EXPECT_EQ((*t)->Get("gpu1")->domain, "holder-a");
  EXPECT_EQ((*t)->RouteTo("gpu0", "holder-a", 1999).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A crash right after the compaction's snapshot (before the rename): the old
// journal is replayed whole on top of it, and ends where it is.
TEST_F(RouteTableTest, CrashBetweenCompactionStepsReplays) {
  RouteTableOptions o;
  o.sync = [](int) { return 0; };
  o.domains = {"holder-a", "holder-b"};
  {
    auto t = RouteTable::Open(&backend_, State(), Audit(), o);
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE((*t)->RouteTo("gpu0", "holder-a", 3).ok());
    ASSERT_TRUE((*t)->RouteTo("gpu0", "holder-b", 4).ok());
  }
  const std::string journal = *ReadFile(Audit());
  {
    o.journal_max_bytes = 1;  // compacts at the next line
    auto t = RouteTable::Open(&backend_, State(), Audit(), o);
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE((*t)->RouteTo("gpu0", "holder-a", 5).ok());
  }
  // Put the state back to "snapshot written, journal not yet renamed": the
  // old journal (with the last line) where the new one is.
  const std::string old_journal = *ReadFile(Audit() + ".1");
  ASSERT_EQ(::rename((Audit() + ".1").c_str(), Audit().c_str()), 0);
  o.journal_max_bytes = 0;
  auto t = RouteTable::Open(&backend_, State(), Audit(), o);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->Get("gpu0")->domain, "holder-a");
  EXPECT_EQ((*t)->Get("gpu0")->fencing_token, 5u);
  EXPECT_GT(old_journal.size(), journal.size());
}

// A slow move holds no lock readers or other GPUs wait on; a second
// decision about the same GPU is refused (to be retried), not queued.
TEST_F(RouteTableTest, SlowMoveBlocksNeitherReadsNorOtherGpus) {
  auto t = Open();
  absl::Notification gate;
  backend_.gate = &gate;
  std::thread mover([&] { EXPECT_TRUE(t->RouteTo("gpu0", "holder-a", 1).ok()); });
  backend_.entered.WaitForNotification();
  auto read = std::async(std::launch::async, [&] {
    auto g = t->Get("gpu0");
    auto all = t->All();
    auto other = t->RouteTo("gpu1", "holder-b", 1);
    auto same = t->RouteTo("gpu0", "holder-c", 2);
    auto reset = t->Reset("gpu0", 2);
    return g.ok() && g->domain.empty() && all.size() == 2 && other.ok() &&
           absl::IsUnavailable(same.status()) && absl::IsUnavailable(reset);
  });
  const bool answered = read.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  gate.Notify();
  mover.join();
  ASSERT_TRUE(answered) << "a read or another GPU waited for gpu0's move";
  EXPECT_TRUE(read.get());
  EXPECT_EQ(t->Get("gpu0")->domain, "holder-a");
  EXPECT_EQ(t->Get("gpu1")->domain, "holder-b");
}

TEST_F(RouteTableTest, CorruptStateRefused) {
  ASSERT_TRUE(WriteFile(State(), "{not json").ok());
  EXPECT_EQ(TryOpen().status().code(), absl::StatusCode::kDataLoss);
}

// A state file written by the MUX before the journal existed was rewritten
// after every move: it is complete, and older audit lines are history.
TEST_F(RouteTableTest, StateFileWithoutJournalSectionIsComplete) {
  ASSERT_TRUE(WriteFile(State(), R"({"gpus": {"gpu0": {"domain": "td-a", "token": 7}}})").ok());
  ASSERT_TRUE(WriteFile(Audit(),
                        R"({"action":"route","from":"","gpu":"gpu0","result":"ok",)"
                        R"("time":1.5,"to":"td-a","token":7})" "\n"
                        R"({"action":"route","from":"td-a","gpu":"gpu0","result":"ok",)"
                        R"("time":1.6,"to":"td-)")  // torn by the old MUX
                  .ok());
  auto t = Open();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->Get("gpu0")->domain, "td-a");
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 7u);
  ASSERT_TRUE(t->RouteTo("gpu0", "td-b", 8).ok());
  t.reset();
  t = Open();
  EXPECT_EQ(t->Get("gpu0")->domain, "td-b");
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 8u);
  EXPECT_EQ(AuditLines().size(), 2u);
}

// After a crash the journal holds decisions the snapshot lacks: a missing or
// replaced audit log is refused rather than forgetting their tokens.
TEST_F(RouteTableTest, ReplacedJournalRefusedAfterACrash) {
  {
    auto t = Open();
    ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 1).ok());
  }
  {
    auto t = Open();  // snapshot covers token 1
    ASSERT_TRUE(t->RouteTo("gpu0", "holder-b", 2).ok());
  }
  ASSERT_EQ(::rename(Audit().c_str(), (Audit() + ".1").c_str()), 0);
  auto t = TryOpen();
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(t.status().message().find("does not continue the journal"), std::string::npos)
      << t.status();
  EXPECT_NE(::access(Audit().c_str(), F_OK), 0) << "a refused start created the journal";
  // A different, longer file in its place is not taken for it either.
  ASSERT_TRUE(WriteFile(Audit(), std::string(4096, 'x') + "\n").ok());
  EXPECT_EQ(TryOpen().status().code(), absl::StatusCode::kDataLoss);
  ASSERT_EQ(::rename((Audit() + ".1").c_str(), Audit().c_str()), 0);
  auto back = Open();
  ASSERT_TRUE(back);
  EXPECT_EQ(back->Get("gpu0")->fencing_token, 2u);
}

// After Close (clean shutdown) the snapshot is complete: the audit log may be
// rotated while the MUX is stopped.
TEST_F(RouteTableTest, CloseAllowsRotatingTheAuditLog) {
  {
    auto t = Open();
    ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 4).ok());
    ASSERT_TRUE(t->Close().ok());
    auto after = t->RouteTo("gpu0", "orch", 4);
    EXPECT_EQ(after.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(after.status().message().find("closed"), std::string::npos) << after.status();
  }
  ASSERT_EQ(::rename(Audit().c_str(), (Audit() + ".1").c_str()), 0);
  auto t = Open();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->Get("gpu0")->domain, "holder-a");
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 4u);
  EXPECT_FALSE(t->RouteTo("gpu0", "orch", 3).ok());
  ASSERT_TRUE(t->RouteTo("gpu0", "orch", 4).ok());
  t.reset();
  t = Open();  // the new log is the journal now
  EXPECT_EQ(t->Get("gpu0")->domain, "orch");
}

// A failed flush: the caller is told, and nothing more is accepted until a
// restart, which reads back what the journal holds.
TEST_F(RouteTableTest, FailedFlushStopsDecisionsUntilRestart) {
  auto t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 1).ok());
  fail_sync_ = true;
  auto r = t->RouteTo("gpu0", "holder-b", 2);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("could not record it durably"), std::string::npos)
      << r.status();
  fail_sync_ = false;
  auto again = t->RouteTo("gpu0", "holder-c", 3);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("restart the MUX"), std::string::npos)
      << again.status();
  EXPECT_EQ(backend_.moves.size(), 2u);  // the refused one never moved
  EXPECT_FALSE(t->Close().ok());
  t.reset();
  t = Open();
  EXPECT_GE(t->Get("gpu0")->fencing_token, 1u);
  ASSERT_TRUE(t->RouteTo("gpu0", "holder-c", 3).ok());
}

// The orchestrator makes a Route the MUX answered UNAVAILABLE once more,
// with the same request and token (TripRunner::CallMux). "moved ... but
// could not record it durably" is such an answer: the move happened, its
// journal line did not (the audit log's file system full). The repeat must
// not be answered OK while no journal line records the route: the
// orchestrator goes on as if it were decided, and a MUX restart forgets
// both the route and its token.
TEST_F(RouteTableTest, ARepeatOfARouteItCouldNotJournalIsNotAcceptedUnrecorded) {
  auto t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "orch", 1).ok());
  auto first = WithAuditLogFull([&] { return t->RouteTo("gpu0", "holder-a", 2); });
  ASSERT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();
  ASSERT_NE(first.status().message().find("could not record it durably"), std::string::npos)
      << first.status();
  // The orchestrator's second try: the same request.
  auto again = t->RouteTo("gpu0", "holder-a", 2);
  if (!again.ok()) return;  // refused: nothing was answered OK unrecorded
  const bool journaled = HasAcceptedLine("route", "holder-a", 2);
  EXPECT_TRUE(journaled) << "the repeated route was answered OK with no journal line for it";
  t.reset();  // a crash
  t = Open();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Get("gpu0")->domain, "holder-a") << "a route answered OK was forgotten";
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 2u) << "a token answered OK was forgotten";
}

// A reset whose journal line failed (the audit log's file system full) left
// the table's token ahead of the journal. A route to where the table has the
// GPU, with the reset's token, is journaled before it is answered OK, so a
// restarted MUX keeps that token and refuses the older one (a stale
// orchestrator, a replay).
TEST_F(RouteTableTest, ARouteAfterAResetItCouldNotJournalIsNotAcceptedUnrecorded) {
  auto t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "orch", 1).ok());
  absl::Status reset = WithAuditLogFull([&] { return t->Reset("gpu0", 2); });
  ASSERT_EQ(reset.code(), absl::StatusCode::kUnavailable) << reset;
  ASSERT_NE(reset.message().find("could not record it durably"), std::string::npos) << reset;
  // The disk has room again; a route home with the reset's token.
  auto route = t->RouteTo("gpu0", "orch", 2);
  if (!route.ok()) return;  // refused: nothing was answered OK unrecorded
  EXPECT_EQ(route->fencing_token, 2u);
  const bool journaled = HasAcceptedLine("", "", 2);
  EXPECT_TRUE(journaled) << "route of gpu0 to orch with token 2 was answered OK, but no journal "
                            "line holds token 2";
  t.reset();  // a crash
  t = Open();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 2u) << "a token answered OK was forgotten";
  auto stale = t->RouteTo("gpu0", "holder-a", 1);
  EXPECT_FALSE(stale.ok()) << "after the restart, token 1 moved gpu0 to holder-a, behind the "
                              "token 2 answered OK before it";
}

// A route whose journal line failed ("moved ... but could not record it
// durably") is not in the snapshot a clean stop (Close) writes: after the
// restart the orchestrator's repeat of it (TripRunner::CallMux retries an
// UNAVAILABLE answer) moves and is journaled before it is answered OK, so
// every route answered OK has its line in the audit log.
TEST_F(RouteTableTest, ARouteItCouldNotJournalIsNotAcceptedUnrecordedAfterACleanRestart) {
  auto t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "orch", 1).ok());
  struct stat st;
  ASSERT_EQ(::stat(Audit().c_str(), &st), 0);
  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit full = saved;
  full.rlim_cur = static_cast<rlim_t>(st.st_size);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &full), 0);
  auto first = t->RouteTo("gpu0", "holder-a", 2);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  ::signal(SIGXFSZ, old_handler);
  ASSERT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();
  ASSERT_NE(first.status().message().find("could not record it durably"), std::string::npos)
      << first.status();
  // The MUX is stopped cleanly (SIGTERM) and started again; then the
  // orchestrator's repeat of the same request.
  ASSERT_TRUE(t->Close().ok());
  t.reset();
  t = Open();
  ASSERT_NE(t, nullptr);
  auto again = t->RouteTo("gpu0", "holder-a", 2);
  if (!again.ok()) return;  // refused: nothing was answered OK unrecorded
  const bool journaled = HasAcceptedLine("route", "holder-a", 2);
  EXPECT_TRUE(journaled) << "route of gpu0 to holder-a with token 2 was answered OK, but no "
                            "audit log line records it";
}

// A route whose journal line failed, then a reset journaled OK (token 3):
// the clean stop's snapshot holds what replaying the journal gives (the
// journaled route with token 3), so the restarted MUX refuses token 2 (a
// stale orchestrator, a replay).
TEST_F(RouteTableTest, AResetJournaledAfterARouteItCouldNotJournalSurvivesACleanRestart) {
  auto t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "orch", 1).ok());
  auto first = WithAuditLogFull([&] { return t->RouteTo("gpu0", "holder-a", 2); });
  ASSERT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();
  // The disk has room again: a reset with a newer trip's token, answered OK.
  ASSERT_TRUE(t->Reset("gpu0", 3).ok());
  ASSERT_TRUE(HasAcceptedLine("reset", "", 3));
  ASSERT_TRUE(t->Close().ok());
  t.reset();
  t = Open();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 3u)
      << "the reset with token 3, answered OK and journaled, was forgotten at a clean restart";
  auto stale = t->RouteTo("gpu0", "holder-b", 2);
  EXPECT_FALSE(stale.ok()) << "after a clean restart, token 2 moved gpu0 to holder-b, behind "
                              "the token 3 answered OK before it";
}

// The repeat of a route whose journal line failed is journaled, and that
// line may start a compaction (journal_max_bytes): its snapshot holds the
// repeated route, so after a crash the route answered OK (holder-a, token 2)
// is kept and token 1 is refused.
TEST_F(RouteTableTest, ACompactionInTheRepeatOfARouteItCouldNotJournalKeepsTheRoute) {
  RouteTableOptions o;
  o.sync = [](int) { return 0; };
  o.domains = {"orch", "holder-a", "holder-b"};
  o.journal_max_bytes = 1;  // compacts after every line
  auto opened = RouteTable::Open(&backend_, State(), Audit(), o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto t = *std::move(opened);
  ASSERT_TRUE(t->RouteTo("gpu0", "orch", 1).ok());
  auto first = WithAuditLogFull([&] { return t->RouteTo("gpu0", "holder-a", 2); });
  ASSERT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();
  auto again = t->RouteTo("gpu0", "holder-a", 2);
  ASSERT_TRUE(again.ok()) << again.status();
  t.reset();  // a crash
  opened = RouteTable::Open(&backend_, State(), Audit(), o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  t = *std::move(opened);
  EXPECT_EQ(t->Get("gpu0")->domain, "holder-a") << "a route answered OK was forgotten";
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 2u) << "a token answered OK was forgotten";
  auto stale = t->RouteTo("gpu0", "holder-b", 1);
  EXPECT_FALSE(stale.ok()) << "after the restart, token 1 moved gpu0 to holder-b, behind the "
                              "token 2 answered OK before it";
}

// A bounded, seeded random walk of routes and resets, with appends that
// fail (the audit log's file system full), journal flushes that fail, other
// flushes that fail (snapshots, directories: compaction steps, Close),
// backend failures, frequent compactions, clean stops and crashes. A model
// holds what the journal holds for each GPU: every decision answered OK, and
// every one whose line reached the file before a failed flush. After every
// restart the table must equal the model exactly: a route or token answered
// OK is never forgotten, no token lower than one answered OK is accepted,
// and nothing whose line never reached the journal is taken as decided.
TEST_F(RouteTableTest, RandomDecisionsFailuresAndRestartsMatchWhatTheJournalHolds) {
  bool fail_journal_sync = false, fail_other_sync = false, fail_dir_sync = false;
  const std::string audit = Audit();
  auto is_journal = [&](int fd) {
    char buf[4096];
    ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), buf, sizeof buf);
    if (n <= 0) return false;
    return std::string(buf, static_cast<size_t>(n)) == audit;
  };
  RouteTableOptions o;
  o.sync = [&](int fd) {
    struct stat st;
    const bool dir = ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
    if (is_journal(fd) ? fail_journal_sync : (fail_other_sync || (dir && fail_dir_sync))) {
      errno = EIO;
      return -1;
    }
    return 0;
  };
  o.domains = {"orch", "holder-a", "holder-b"};
  o.journal_max_bytes = 700;  // a compaction every few lines
  auto open = [&] {
    auto t = RouteTable::Open(&backend_, State(), Audit(), o);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? std::move(*t) : nullptr;
  };
  const std::vector<std::string> gpus = {"gpu0", "gpu1"};
  const std::vector<std::string> domains = {"", "orch", "holder-a", "holder-b"};
  std::map<std::string, Route> model;  // what replaying the journal gives
  std::map<std::string, uint64_t> ok_max;  // highest token answered OK
  for (const auto& g : gpus) model[g] = Route{};
  std::mt19937 rng(20261127);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::vector<std::string> history;
  auto trace = [&] {
    std::string s;
    for (size_t i = history.size() > 40 ? history.size() - 40 : 0; i < history.size(); ++i) {
      s += history[i] + "\n";
    }
    return s;
  };
  auto t = open();
  ASSERT_NE(t, nullptr);
  ino_t compacted_ino = 0;
  for (int step = 0; step < 6000; ++step) {
    const std::string g = gpus[pick(2)];
    const int kind = pick(100);
    const bool stopped = !history.empty() && history.back().find("restart the MUX") !=
                                                 std::string::npos;
    struct stat st1, st0;
    const bool just_compacted = ::stat((Audit() + ".1").c_str(), &st1) == 0 &&
                                st1.st_ino != compacted_ino && ::stat(Audit().c_str(), &st0) == 0 &&
                                st0.st_size == 0;
    if (just_compacted) compacted_ino = st1.st_ino;
    if (kind < 6 || stopped || (just_compacted && pick(4) == 0)) {  // a restart
      const int how = just_compacted ? pick(4) : pick(2);
      if (how == 0) (void)t->Close();
      t.reset();
      if (how == 2) {  // a crash in the compaction, before the journal's rename
        ASSERT_EQ(::rename((Audit() + ".1").c_str(), Audit().c_str()), 0);
      } else if (how == 3) {  // a crash in the compaction, before the new journal
        ASSERT_EQ(::unlink(Audit().c_str()), 0);
      }
      history.push_back(how == 0   ? "close+open"
                        : how == 1 ? "crash+open"
                        : how == 2 ? "crash before the compaction's rename+open"
                                   : "crash before the compaction's new journal+open");
      t = open();
      ASSERT_NE(t, nullptr) << trace();
      for (const auto& gg : gpus) {
        Route got = *t->Get(gg);
        ASSERT_EQ(got.domain, model[gg].domain) << gg << " after\n" << trace();
        ASSERT_EQ(got.fencing_token, model[gg].fencing_token) << gg << " after\n" << trace();
        ASSERT_GE(got.fencing_token, ok_max[gg]) << gg << " after\n" << trace();
      }
      continue;
    }
    const uint64_t live = t->Get(g)->fencing_token;
    const int delta = pick(5) - 1;  // -1 .. 3
    const uint64_t token = delta < 0 && live == 0 ? 0 : live + delta;
    const bool full = pick(100) < 20;
    audit_room_ = pick(3) == 0 ? static_cast<rlim_t>(pick(100)) : 0;
    fail_journal_sync = pick(100) < 3;
    fail_other_sync = pick(100) < 5;
    fail_dir_sync = pick(100) < 8;
    backend_.fail = pick(100) < 8;
    const bool reset = pick(100) < 30;
    const std::string d = domains[pick(4)];
    absl::Status st;
    if (reset) {
      auto run = [&] { return t->Reset(g, token); };
      st = full ? WithAuditLogFull(run) : run();
    } else {
      auto run = [&] { return t->RouteTo(g, d, token).status(); };
      st = full ? WithAuditLogFull(run) : run();
    }
    const bool flush_failed = fail_journal_sync;
    fail_journal_sync = fail_other_sync = fail_dir_sync = false;
    backend_.fail = false;
    history.push_back(std::string(reset ? "reset " : "route ") + g + (reset ? "" : " to '" + d + "'") +
                      " token " + std::to_string(token) + (full ? " [full]" : "") +
                      (flush_failed ? " [journal flush fails]" : "") + ": " + st.ToString());
    const std::string msg(st.message());
    // The line is in the file: answered OK, or written and then its flush failed.
    const bool in_journal =
        st.ok() || (msg.find("could not record it durably: cannot flush MUX audit log") !=
                    std::string::npos);
    if (!in_journal) continue;
    Route& m = model[g];
    if (!reset) m.domain = d;
    m.fencing_token = std::max(m.fencing_token, token);
    if (st.ok()) ok_max[g] = std::max(ok_max[g], token);
  }
  // The walk reached every case it is meant to.
  std::map<std::string, int> seen;
  const std::vector<std::string> cases = {
      "close+open", "crash+open", "compaction's rename", "compaction's new", "[full]: UNAVAILABLE",
      ": OK", "FAILED_PRECONDITION: stale", "cannot flush MUX audit log", "restart the MUX"};
  for (const std::string& h : history) {
    for (const std::string& c : cases) {
      if (h.find(c) != std::string::npos) ++seen[c];
    }
  }
  for (const std::string& c : cases) EXPECT_GT(seen[c], 0) << c;
  EXPECT_GT(seen[": OK"], 1000);
}

}  // namespace
}  // namespace gputravel
