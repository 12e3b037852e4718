// docs/cli.md against the real orchestrator. Every example in a fenced block
// that starts with `$ gputravel` is run, in the scenario below, against the
// emulated stack, and what the doc shows must be what the CLI prints: line
// by line, with times, numbers, identifiers, paths and column spacing
// normalised, and "..." in the doc standing for any lines. Every usage form
// (a fenced line `gputravel CMD ARGS [--flag ...]`) must match the
// command's --help: its arguments, and every flag it names must exist. A
// doc example the scenario does not run fails the test (add it here).
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/emulated_stack.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/orchestrator.grpc.pb.h"
#include "tests/gpu_contact.h"
#include "tests/operator_cli.h"
#include "util/files.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

struct Example {
  int line = 0;              // of the `$ gputravel` line in docs/cli.md
  std::string command;       // after "$ gputravel ", without a trailing "# comment"
  std::string comment;       // the trailing comment ("orchestrator down")
  std::vector<std::string> output;
};

struct UsageForm {
  int line = 0;
  std::string text;  // "gputravel create SPEC.json [--request_id ID] [--start]"
};

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The examples and usage forms of the fenced blocks (```sh blocks are
// scripts, not claims about output).
void Parse(const std::string& md, std::vector<Example>* examples, std::vector<UsageForm>* forms) {
  std::istringstream in(md);
  std::string line;
  int n = 0;
  bool in_block = false, script = false;
  Example* open = nullptr;
  auto close = [&] {
    if (open == nullptr) return;
    while (!open->output.empty() && Trim(open->output.back()).empty()) open->output.pop_back();
    open = nullptr;
  };
  static const std::regex usage(R"(^gputravel [a-z]+( [a-z]+)?( [A-Z\[].*)?$)");
  while (std::getline(in, line)) {
    ++n;
    if (line.rfind("```", 0) == 0) {
      close();
      script = !in_block && line.size() > 3;
      in_block = !in_block;
      continue;
    }
    if (!in_block || script) continue;
    if (line.rfind("$ ", 0) == 0 && line.rfind("$ gputravel ", 0) != 0) {
      close();  // another program's command line: the scenario does it
      continue;
    }
    if (line.rfind("$ gputravel ", 0) == 0) {
      close();
      Example e;
      e.line = n;
      std::string cmd = line.substr(12);
      size_t hash = cmd.find(" #");
      if (hash != std::string::npos) {
        e.comment = Trim(cmd.substr(hash + 2));
        cmd = cmd.substr(0, hash);
      }
      e.command = Trim(cmd);
      examples->push_back(e);
      open = &examples->back();
      continue;
    }
    if (open != nullptr) {
      open->output.push_back(line);
    } else if (std::regex_match(line, usage)) {
      forms->push_back(UsageForm{n, line});
    }
  }
}

// What may differ between runs: times, request ids, hex, paths, numbers and
// column spacing.
std::string Normalise(std::string s) {
  static const std::vector<std::pair<std::regex, std::string>> rules = {
      {std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z)"), "<time>"},
      {std::regex(R"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"), "<uuid>"},
      {std::regex(R"(\b[0-9a-f]{16,}\b)"), "<hex>"},
      {std::regex(R"(unix:[^ ;:,)]+)"), "unix:<path>"},
      {std::regex(R"((/[A-Za-z0-9._-]+)+/[A-Za-z0-9._-]+)"), "<path>"},
      {std::regex(R"(\d+(\.\d+)?)"), "#"},
      {std::regex(R"(\s+)"), " "},
  };
  for (const auto& [re, with] : rules) s = std::regex_replace(s, re, with);
  return Trim(s);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  while (!out.empty() && Trim(out.back()).empty()) out.pop_back();
  return out;
}

// Whether `real` matches the documented lines `doc` ("..." stands for any
// lines); `*why` says where it does not.
bool Matches(const std::vector<std::string>& doc, const std::vector<std::string>& real,
             std::string* why) {
  // Split the doc at "..." into segments that must match consecutive lines.
  std::vector<std::vector<std::string>> segments(1);
  for (const auto& d : doc) {
    if (Trim(d) == "...") {
      segments.emplace_back();
    } else {
      segments.back().push_back(Normalise(d));
    }
  }
  std::vector<std::string> got;
  for (const auto& r : real) got.push_back(Normalise(r));
  size_t at = 0;
  for (size_t s = 0; s < segments.size(); ++s) {
    const auto& seg = segments[s];
    const bool anchored_start = s == 0;
    const bool anchored_end = s + 1 == segments.size();
    bool found = false;
    for (size_t start = at; start + seg.size() <= got.size(); ++start) {
      if (anchored_start && start != 0) break;
      if (anchored_end && start + seg.size() != got.size()) continue;
      bool all = true;
      for (size_t i = 0; i < seg.size() && all; ++i) all = got[start + i] == seg[i];
      if (all) {
        at = start + seg.size();
        found = true;
        break;
      }
    }
    if (!found) {
      *why = "no match for the documented lines:\n  " +
             (seg.empty() ? std::string("(end of output)") : seg.front()) +
             "\n(normalised); the CLI printed:\n";
      for (const auto& r : real) *why += r + "\n";
      return false;
    }
  }
  return true;
}

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

class CliDocTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto runfiles = getenv("TEST_SRCDIR");
    ASSERT_NE(runfiles, nullptr);
    auto md = ReadFile(std::string(runfiles) + "/gputravel/docs/cli.md");
    ASSERT_TRUE(md.ok()) << md.status();
    Parse(*md, &examples_, &forms_);
    ASSERT_FALSE(examples_.empty());
  }

  // Runs one scenario command and keeps its output for the doc's examples.
  void Run(const std::string& command, const std::vector<std::string>& args,
           const std::string& endpoint = "") {
    std::string out;
    const int rc = RunOperatorCli(*stack_, args, 120, &out, endpoint);
    EXPECT_NE(rc, -1) << command << " did not exit";
    outputs_[command].push_back(out);
  }

  // Runs one offline scenario command (no orchestrator), for at most
  // `seconds`, or until the file `stop_once` exists (then SIGTERM: `up`
  // serves until stopped).
  void RunOffline(const std::string& command, const std::vector<std::string>& args, double seconds,
                  const std::string& stop_once = "") {
    std::string out;
    const std::string log = stack_->dir() + "/offline-cli.log";
    ::unlink(log.c_str());
    RunCli(args, log, seconds, &out, stop_once);
    outputs_[command].push_back(out);
  }

  std::vector<Example> examples_;
  std::vector<UsageForm> forms_;
  std::unique_ptr<EmulatedStack> stack_;
  // Scenario command -> what each of its runs printed, in order.
  std::map<std::string, std::vector<std::string>> outputs_;
};

TEST_F(CliDocTest, EveryDocumentedExampleIsWhatTheCliPrints) {
  StackOptions o;
  o.holders = 3;
  o.log_level = 0;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  stack_ = std::move(*stack);
  auto stub = stack_->OperatorClient();
  const std::string tmp = TestTmpDir();
  nlohmann::json spec = stack_->CampaignSpec();
  spec["name"] = "demo";
  const std::string spec_path = tmp + "/campaign.json";
  ASSERT_TRUE(WriteNewFile(spec_path, spec.dump(2), 0600).ok());
  nlohmann::json second = stack_->CampaignSpec();
  second["name"] = "second";
  second["rounds"] = 40;
  const std::string second_path = tmp + "/second.json";
  ASSERT_TRUE(WriteNewFile(second_path, second.dump(2), 0600).ok());
  const std::string down = "unix:" + stack_->dir() + "/nothing-listens.sock";
  const std::string holder_a = spec["holders"][0]["endpoint"];

  // The GPU idle, home and known.
  WaitForGpuContact(stub.get());
  Run("gpus", {"gpus"});
  Run("holders check --holder_endpoint unix:/run/gputravel/holder-a/api.sock --name holder-a "
      "--domain td-holder-a --dataset holder-a-tokens",
      {"holders", "check", "--holder_endpoint", holder_a, "--name", "holder-a", "--domain",
       "td-holder-a", "--dataset", "holder-a-tokens"});
  Run("create campaign.json --request_id=rid-7", {"create", spec_path, "--request_id=rid-7"},
      down);
  Run("list", {"list"}, down);
  Run("create campaign.json --start", {"create", spec_path, "--start"});
  Run("watch demo", {"watch", "demo"});
  Run("status demo --trips", {"status", "demo", "--trips"});
  Run("holders --campaign demo", {"holders", "--campaign", "demo"});
  Run("start demo", {"start", "demo"});
  Run("status nope", {"status", "nope"});
  Run("create second.json --start", {"create", second_path, "--start"});
  {
    // Cancel once the second campaign's first trip started.
    grpc::ClientContext ctx;
    ctx.set_deadline(In(120));
    v1::WatchCampaignRequest req;
    req.set_name("second");
    auto reader = stub->WatchCampaign(&ctx, req);
    v1::Event ev;
    while (reader->Read(&ev) && ev.kind() != v1::TRIP_STARTED) {
    }
    ctx.TryCancel();
    (void)reader->Finish();
  }
  Run("cancel second --wait", {"cancel", "second", "--wait"});
  Run("list (two campaigns)", {"list"});

  // The deployment kit, offline: init, up (until stopped), config check of
  // what init wrote, then of a key made readable and a domain taken out.
  const std::string gt = stack_->dir() + "/gt";
  RunOffline("init /tmp/gt", {"init", gt}, 120);
  const std::string ready = stack_->dir() + "/up.ready";
  RunOffline("up /tmp/gt", {"up", gt, "--ready_file", ready}, 120, ready);
  RunOffline("config check /tmp/gt", {"config", "check", gt}, 60);
  ASSERT_EQ(::chmod((gt + "/pki/attest-td-holder-b-key.pem").c_str(), 0644), 0);
  {
    auto mux = ReadFile(gt + "/mux.json");
    ASSERT_TRUE(mux.ok()) << mux.status();
    nlohmann::json j = nlohmann::json::parse(*mux);
    nlohmann::json domains = nlohmann::json::array();
    for (const auto& d : j["domains"]) {
      if (d != "td-holder-c") domains.push_back(d);
    }
    j["domains"] = domains;
    ASSERT_TRUE(WriteFile(gt + "/mux.json", j.dump(2), 0600).ok());
  }
  RunOffline("config check /tmp/gt", {"config", "check", gt}, 60);

  std::map<std::string, size_t> used;  // runs of each command compared so far
  for (const Example& e : examples_) {
    std::string key = e.command;
    if (e.command == "list" && e.comment.empty()) key = "list (two campaigns)";
    auto it = outputs_.find(key);
    if (it == outputs_.end() || used[key] >= it->second.size()) {
      ADD_FAILURE() << "docs/cli.md:" << e.line << ": `$ gputravel " << e.command
                    << "` is not a command this test runs; add it to its scenario";
      continue;
    }
    std::string why;
    EXPECT_TRUE(Matches(e.output, Lines(it->second[used[key]++]), &why))
        << "docs/cli.md:" << e.line << ": `$ gputravel " << e.command << "`: " << why;
  }
}

TEST_F(CliDocTest, EveryUsageFormMatchesTheCommandsHelp) {
  ASSERT_FALSE(forms_.empty());
  auto runfiles = getenv("TEST_SRCDIR");
  const std::string bin = std::string(runfiles) + "/gputravel/cli/gputravel";
  for (const UsageForm& f : forms_) {
    // "gputravel CMD [SUB] ARGS... [--flag X]..."
    std::istringstream words(f.text.substr(10));
    std::string cmd, w;
    words >> cmd;
    std::vector<std::string> flags;
    std::string args;
    while (words >> w) {
      std::smatch m;
      std::string rest = w;
      static const std::regex flag(R"(--([a-z_]+))");
      if (std::regex_search(rest, m, flag)) {
        flags.push_back(m[1]);
      } else if (w[0] != '[' && w.back() != ']' && flags.empty()) {
        args += " " + w;
      }
    }
    const std::string out_file = TestTmpDir() + "/help.txt";
    const std::string sh = bin + " " + cmd + " --help > " + out_file + " 2>&1";
    ASSERT_EQ(std::system(sh.c_str()), 0) << sh;
    auto help = ReadFile(out_file);
    ASSERT_TRUE(help.ok());
    // The first line: "Usage: gputravel CMD ARGS [flags]".
    const std::string usage = "Usage: gputravel " + cmd + args;
    EXPECT_EQ(help->rfind(usage, 0), 0u)
        << "docs/cli.md:" << f.line << ": `" << f.text << "`: --help begins:\n"
        << help->substr(0, help->find('\n'));
    for (const auto& fl : flags) {
      EXPECT_NE(help->find("--" + fl), std::string::npos)
          << "docs/cli.md:" << f.line << ": `" << f.text << "`: --help has no --" << fl;
    }
  }
}

}  // namespace
}  // namespace gputravel
