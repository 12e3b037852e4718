#include "orchestrator/campaign_spec.h"

#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

using nlohmann::json;

const char kWhere[] = "campaign.json: ";

SpecOptions Opts() {
  SpecOptions o;
  o.known_gpus = {"gpu0", "gpu1"};
  o.reserved_domains = {"td-orchestrator", "td-mux"};
  return o;
}

// Every field set, none to its default.
json Full() {
  return json::parse(R"({
    "name": "pretrain-1",
    "gpu": "gpu1",
    "buffer_bytes": 8388608,
    "chunk_bytes": 1048576,
    "rounds": 3,
    "schedule": "proportional",
    "holder_timeout_seconds": 60.5,
    "on_holder_failure": "pause",
    "holders": [
      {"name": "hospital-a", "endpoint": "unix:/run/a.sock", "domain": "td-hospital-a",
       "dataset": {"name": "notes-2025", "format": "llmc-tokens"}},
      {"name": "hospital-b", "endpoint": "10.0.0.2:50051", "domain": "td-hospital-b",
       "dataset": {"name": "scans", "format": "raw"}},
      {"name": "lab.c_3", "endpoint": "[fd00::3]:443", "domain": "td-lab-c",
       "dataset": {"name": "tokens", "format": "auto"}}
    ],
    "trainer": {"kind": "none", "vocab": 1024, "dim": 64, "learning_rate": 0.125,
                "batch_tokens": 4096, "seed": 18446744073709551615}
  })");
}

// Only the required fields.
json Minimal() {
  return json::parse(R"({
    "name": "m", "gpu": "gpu0", "buffer_bytes": 4096,
    "holders": [{"name": "a", "endpoint": "localhost:50051", "domain": "ta",
                 "dataset": {"name": "d"}}]
  })");
}

TEST(CampaignSpecTest, FullSpecParses) {
  auto s = ParseCampaignSpec(Full(), kWhere, Opts());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "pretrain-1");
  EXPECT_EQ(s->gpu, "gpu1");
  EXPECT_EQ(s->buffer_bytes, 8388608u);
  EXPECT_EQ(s->chunk_bytes, 1048576u);
  EXPECT_EQ(s->rounds, 3u);
  EXPECT_EQ(s->schedule, SchedulePolicy::kProportional);
  EXPECT_EQ(s->holder_timeout_seconds, 60.5);
  EXPECT_EQ(s->on_holder_failure, HolderFailurePolicy::kPause);
  ASSERT_EQ(s->holders.size(), 3u);
  EXPECT_EQ(s->holders[0].name, "hospital-a");
  EXPECT_EQ(s->holders[0].endpoint, "unix:/run/a.sock");
  EXPECT_EQ(s->holders[0].domain, "td-hospital-a");
  EXPECT_EQ(s->holders[0].dataset.name, "notes-2025");
  EXPECT_EQ(s->holders[0].dataset.format, "llmc-tokens");
  EXPECT_EQ(s->holders[1].dataset.format, "raw");
  EXPECT_EQ(s->holders[2].endpoint, "[fd00::3]:443");
  EXPECT_EQ(s->trainer.kind, "none");
  EXPECT_EQ(s->trainer.vocab, 1024u);
  EXPECT_EQ(s->trainer.dim, 64u);
  EXPECT_EQ(s->trainer.learning_rate, 0.125);
  EXPECT_EQ(s->trainer.batch_tokens, 4096u);
  EXPECT_EQ(s->trainer.seed, UINT64_MAX);
}

TEST(CampaignSpecTest, MinimalSpecGetsDefaults) {
  auto s = ParseCampaignSpec(Minimal(), kWhere, Opts());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->chunk_bytes, 2u << 20);
  EXPECT_EQ(s->copy_engines, 0u) << "not given: the machine's default when planned";
  EXPECT_EQ(CopyEnginesFor(*s), DefaultCopyEngines());
  EXPECT_GE(DefaultCopyEngines(), 1u);
  EXPECT_LE(DefaultCopyEngines(), 8u);
  EXPECT_EQ(CampaignSpecToJson(*s).count("copy_engines"), 0u);
  EXPECT_EQ(s->rounds, 1u);
  EXPECT_EQ(s->schedule, SchedulePolicy::kRoundRobin);
  EXPECT_EQ(s->holder_timeout_seconds, 120.0);
  EXPECT_EQ(s->on_holder_failure, HolderFailurePolicy::kSkip);
  EXPECT_EQ(s->holders[0].dataset.format, "auto");
  EXPECT_EQ(s->trainer, TrainerSpec());
  EXPECT_EQ(s->trainer.kind, "next-token");
  EXPECT_EQ(s->trainer.vocab, 512u);
  EXPECT_EQ(s->trainer.dim, 32u);
  EXPECT_EQ(s->trainer.learning_rate, 0.05);
  EXPECT_EQ(s->trainer.batch_tokens, 65536u);
  EXPECT_EQ(s->trainer.seed, 1u);
}

TEST(CampaignSpecTest, PartialTrainerKeepsOtherDefaults) {
  json j = Minimal();
  j["trainer"] = {{"dim", 8}};
  auto s = ParseCampaignSpec(j, kWhere, Opts());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->trainer.kind, "next-token");
  EXPECT_EQ(s->trainer.dim, 8u);
  EXPECT_EQ(s->trainer.vocab, 512u);
}

// An external trainer: its identity is required and a valid name; the
// built-in model's fields are refused for it, and its own fields for the
// other kinds; the canonical form round-trips.
TEST(CampaignSpecTest, ExternalTrainer) {
  json j = Minimal();
  j["trainer"] = {{"kind", "external"}, {"identity", "torch-1"}, {"vocab", 1024},
                  {"batch_tokens", 8192}, {"timeout_seconds", 60},
                  {"release_timeout_seconds", 5}, {"on_failure", "fail"}};
  auto s = ParseCampaignSpec(j, kWhere, Opts());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->trainer.kind, "external");
  EXPECT_EQ(s->trainer.identity, "torch-1");
  EXPECT_EQ(s->trainer.timeout_seconds, 60);
  EXPECT_EQ(s->trainer.release_timeout_seconds, 5);
  EXPECT_EQ(s->trainer.on_failure, "fail");
  auto again = ParseCampaignSpec(CampaignSpecToJson(*s), kWhere, Opts());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(*again == *s);
  EXPECT_EQ(CampaignSpecToJson(*s)["trainer"].count("dim"), 0u);
  EXPECT_EQ(CampaignSpecToJson(*s)["trainer"]["timeout_seconds"], 60);

  json defaults = Minimal();
  defaults["trainer"] = {{"kind", "external"}, {"identity", "t"}};
  auto d = ParseCampaignSpec(defaults, kWhere, Opts());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->trainer.timeout_seconds, 600);
  EXPECT_EQ(d->trainer.release_timeout_seconds, 30);
  EXPECT_EQ(d->trainer.on_failure, "pause");

  const std::vector<std::pair<json, std::string>> bad = {
      {{{"kind", "external"}}, "trainer.identity: missing (required)"},
      {{{"kind", "external"}, {"identity", "Bad Name"}}, "trainer.identity: "},
      {{{"kind", "external"}, {"identity", "t"}, {"dim", 8}},
       "trainer.dim: shapes the built-in model only"},
      {{{"kind", "external"}, {"identity", "t"}, {"learning_rate", 0.01}},
       "trainer.learning_rate: shapes the built-in model only"},
      {{{"kind", "external"}, {"identity", "t"}, {"seed", 3}},
       "trainer.seed: shapes the built-in model only"},
      {{{"kind", "external"}, {"identity", "t"}, {"on_failure", "skip"}},
       "trainer.on_failure: must be one of pause, fail"},
      {{{"kind", "external"}, {"identity", "t"}, {"timeout_seconds", 0}},
       "trainer.timeout_seconds: must be > 0"},
      {{{"kind", "next-token"}, {"identity", "t"}},
       "trainer.identity: applies to kind \"external\" only"},
      {{{"timeout_seconds", 5}}, "trainer.timeout_seconds: applies to kind \"external\" only"},
  };
  for (const auto& [trainer, want] : bad) {
    json b = Minimal();
    b["trainer"] = trainer;
    auto r = ParseCampaignSpec(b, kWhere, Opts());
    ASSERT_FALSE(r.ok()) << trainer.dump();
    EXPECT_NE(r.status().message().find(want), std::string::npos)
        << trainer.dump() << ": " << r.status().message();
  }
}

TEST(CampaignSpecTest, RoundTripFull) {
  auto s = ParseCampaignSpec(Full(), kWhere, Opts());
  ASSERT_TRUE(s.ok()) << s.status();
  auto again = ParseCampaignSpec(CampaignSpecToJson(*s), kWhere, Opts());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *s);
  EXPECT_EQ(CanonicalSpecJson(*again), CanonicalSpecJson(*s));
}

TEST(CampaignSpecTest, RoundTripMinimalFillsEveryDefault) {
  auto s = ParseCampaignSpec(Minimal(), kWhere, Opts());
  ASSERT_TRUE(s.ok()) << s.status();
  json canon = CampaignSpecToJson(*s);
  for (const char* f : {"chunk_bytes", "rounds", "schedule", "holder_timeout_seconds",
                        "on_holder_failure", "trainer"}) {
    EXPECT_TRUE(canon.contains(f)) << f;
  }
  EXPECT_EQ(canon["holders"][0]["dataset"]["format"], "auto");
  EXPECT_EQ(canon["trainer"]["kind"], "next-token");
  auto again = ParseCampaignSpec(canon, kWhere, Opts());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *s);
}

TEST(CampaignSpecTest, CanonicalJsonIgnoresKeyOrderAndExplicitDefaults) {
  auto a = ParseCampaignSpecText(
      R"({"name":"m","gpu":"gpu0","buffer_bytes":4096,
          "holders":[{"name":"a","endpoint":"localhost:50051","domain":"ta","dataset":{"name":"d"}}]})",
      kWhere, Opts());
  auto b = ParseCampaignSpecText(
      R"({"holders":[{"dataset":{"format":"auto","name":"d"},"domain":"ta","endpoint":"localhost:50051","name":"a"}],
          "trainer":{"kind":"next-token"},"rounds":1,"holder_timeout_seconds":120,
          "buffer_bytes":4096,"gpu":"gpu0","name":"m","schedule":"round-robin","chunk_bytes":2097152})",
      kWhere, Opts());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(CanonicalSpecJson(*a), CanonicalSpecJson(*b));
  CampaignSpec c = *a;
  c.rounds = 2;
  EXPECT_NE(CanonicalSpecJson(c), CanonicalSpecJson(*a));
}

TEST(CampaignSpecTest, PolicyNames) {
  EXPECT_STREQ(SchedulePolicyName(SchedulePolicy::kRoundRobin), "round-robin");
  EXPECT_STREQ(SchedulePolicyName(SchedulePolicy::kProportional), "proportional");
  EXPECT_STREQ(HolderFailurePolicyName(HolderFailurePolicy::kSkip), "skip");
  EXPECT_STREQ(HolderFailurePolicyName(HolderFailurePolicy::kPause), "pause");
}

// copy_engines: 1..8 (the GPU's LCE0..LCE7), kept through the JSON round
// trip; anything else is refused with a message that says why.
TEST(CampaignSpecTest, CopyEnginesAreOneToEight) {
  for (uint32_t k : {1u, 2u, 8u}) {
    json j = Minimal();
    j["copy_engines"] = k;
    auto s = ParseCampaignSpec(j, kWhere, Opts());
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->copy_engines, k);
    EXPECT_EQ(CopyEnginesFor(*s), k);
    auto again = ParseCampaignSpec(CampaignSpecToJson(*s), kWhere, Opts());
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again, *s);
  }
  for (json bad : {json(0), json(9), json(-1), json(2.5), json("4")}) {
    json j = Minimal();
    j["copy_engines"] = bad;
    auto s = ParseCampaignSpec(j, kWhere, Opts());
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("copy_engines"), std::string::npos) << s.status();
    EXPECT_NE(s.status().message().find("eight copy engines"), std::string::npos) << s.status();
  }
}

TEST(CampaignSpecTest, BoundaryValuesAccepted) {
  json j = Minimal();
  j["buffer_bytes"] = 64ull << 30;
  j["chunk_bytes"] = 64u << 20;
  j["rounds"] = 1000000;
  j["holder_timeout_seconds"] = 86400;
  // The largest model whose checkpoint the store keeps (898,891,832 bytes)...
  j["trainer"] = {{"vocab", 65536}, {"dim", 571}, {"learning_rate", 100},
                  {"batch_tokens", 16u << 20}, {"seed", 0}};
  auto s = ParseCampaignSpec(j, kWhere, Opts());
  ASSERT_TRUE(s.ok()) << s.status();
  // ...and the largest dims without a model.
  j["trainer"] = {{"kind", "none"}, {"vocab", 65536}, {"dim", 1024}};
  s = ParseCampaignSpec(j, kWhere, Opts());
  ASSERT_TRUE(s.ok()) << s.status();
  j["buffer_bytes"] = 32;
  j["chunk_bytes"] = 32;
  j["rounds"] = 1;
  j["holder_timeout_seconds"] = 0.001;
  j["trainer"] = {{"vocab", 2}, {"dim", 1}, {"learning_rate", 1e-9}, {"batch_tokens", 2}};
  s = ParseCampaignSpec(j, kWhere, Opts());
  ASSERT_TRUE(s.ok()) << s.status();
  // A name of the maximum length (63).
  j["name"] = std::string(63, 'a');
  EXPECT_TRUE(ParseCampaignSpec(j, kWhere, Opts()).ok());
}

TEST(CampaignSpecTest, TwoHundredFiftySixHoldersAccepted) {
  json j = Minimal();
  j["holders"] = json::array();
  for (int i = 0; i < 256; ++i) {
    std::string n = "h" + std::to_string(i);
    j["holders"].push_back({{"name", n},
                            {"endpoint", "unix:/run/" + n + ".sock"},
                            {"domain", "td-" + n},
                            {"dataset", {{"name", "d"}}}});
  }
  auto s = ParseCampaignSpec(j, kWhere, Opts());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->holders.size(), 256u);
}

TEST(CampaignSpecTest, GoodEndpointFormsAccepted) {
  for (const char* e : {"unix:/run/a.sock", "unix:///run/a.sock", "localhost:50051",
                        "10.0.0.1:1", "holder-a.example.com:65535", "my_host:8080",
                        "[::1]:50051", "[fe80::1:2]:443", "[::ffff:10.0.0.1]:9000"}) {
    json j = Minimal();
    j["holders"][0]["endpoint"] = e;
    auto s = ParseCampaignSpec(j, kWhere, Opts());
    EXPECT_TRUE(s.ok()) << e << ": " << s.status();
  }
}

TEST(CampaignSpecTest, SignedIntegersBuiltInCodeAccepted) {
  // json built from C++ ints holds non-negative values as signed integers.
  json j = Minimal();
  j["buffer_bytes"] = static_cast<int64_t>(4096);
  j["rounds"] = static_cast<int>(2);
  auto s = ParseCampaignSpec(j, kWhere, Opts());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->buffer_bytes, 4096u);
  EXPECT_EQ(s->rounds, 2u);
}

TEST(CampaignSpecTest, WhereIsThePrefix) {
  json j = Minimal();
  j.erase("gpu");
  auto s = ParseCampaignSpec(j, "CreateCampaign.spec_json: ", Opts());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "CreateCampaign.spec_json: gpu: missing (required)");
}

TEST(CampaignSpecTest, NoGpusConfigured) {
  auto s = ParseCampaignSpec(Minimal(), kWhere, SpecOptions{});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "campaign.json: gpu: unknown GPU \"gpu0\" (no GPUs are configured)");
}

TEST(CampaignSpecTextTest, ValidTextParses) {
  auto s = ParseCampaignSpecText(Full().dump(2), kWhere, Opts());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, *ParseCampaignSpec(Full(), kWhere, Opts()));
}

TEST(CampaignSpecTextTest, SyntaxErrorGivesBytePosition) {
  auto s = ParseCampaignSpecText("{\"name\": \"a\",\n \"gpu\": }", kWhere, Opts());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string m(s.status().message());
  EXPECT_EQ(m.rfind("campaign.json: invalid JSON at byte 23: ", 0), 0u) << m;
  EXPECT_NE(m.find("line 2"), std::string::npos) << m;
}

TEST(CampaignSpecTextTest, EmptyTextIsAnError) {
  auto s = ParseCampaignSpecText("", kWhere, Opts());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("campaign.json: invalid JSON at byte"), std::string::npos)
      << s.status();
}

TEST(CampaignSpecTextTest, TrailingGarbageIsAnError) {
  auto s = ParseCampaignSpecText(Minimal().dump() + " x", kWhere, Opts());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("invalid JSON at byte"), std::string::npos) << s.status();
}

TEST(CampaignSpecTextTest, DuplicateTopLevelKey) {
  std::string text = Minimal().dump();
  text.insert(1, "\"rounds\": 5, \"rounds\": 1, ");
  auto s = ParseCampaignSpecText(text, kWhere, Opts());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "campaign.json: rounds: appears twice in the same object");
}

TEST(CampaignSpecTextTest, DuplicateNestedKeyNamesItsPath) {
  auto s = ParseCampaignSpecText(
      R"({"name":"m","gpu":"gpu0","buffer_bytes":4096,"trainer":{"seed":[1,{"a":0}]},
          "holders":[{"name":"a","endpoint":"h:1","domain":"ta","dataset":{"name":"d"}},
                     {"name":"b","endpoint":"h:2","domain":"tb",
                      "dataset":{"name":"d","format":"raw","name":"e"}}]})",
      kWhere, Opts());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "campaign.json: holders[1].dataset.name: appears twice in the same object");
}

// One row per rule: `mutate` breaks one field of Full(); the error must start
// with `where` followed by `expected` (the field path and what is wrong).
struct BadCase {
  std::string name;
  std::function<void(json&)> mutate;
  std::string expected;
};

std::ostream& operator<<(std::ostream& os, const BadCase& c) { return os << c.name; }

class BadSpecTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadSpecTest, ErrorNamesTheFieldPath) {
  json j = Full();
  GetParam().mutate(j);
  auto s = ParseCampaignSpec(j, kWhere, Opts());
  ASSERT_FALSE(s.ok()) << "accepted: " << j.dump();
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string m(s.status().message());
  const std::string want = std::string(kWhere) + GetParam().expected;
  EXPECT_EQ(m.rfind(want, 0), 0u) << "got:  " << m << "\nwant: " << want << "...";
  // The text entry point reports the same error.
  auto t = ParseCampaignSpecText(j.dump(), kWhere, Opts());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), s.status().message());
}

json& H(json& j, int i) { return j["holders"][i]; }

// Shorthands for the table.
#define SET(path, value) [](json& j) { j path = value; }
#define ERASE(path, key) [](json& j) { j path.erase(key); }

INSTANTIATE_TEST_SUITE_P(
    Fields, BadSpecTest,
    ::testing::Values(
        // The document itself.
        BadCase{"NotAnObject", [](json& j) { j = json::array(); },
                "the spec must be a JSON object (got an array)"},
        BadCase{"UnknownTopField", SET(["bufer_bytes"], 64),
                "unknown field 'bufer_bytes' (did you mean 'buffer_bytes'? accepted: buffer_bytes, "
                "chunk_bytes, copy_engines, gpu, holder_timeout_seconds, holders, name, "
                "on_holder_failure, "
                "rounds, schedule, trainer)"},
        BadCase{"UnknownTopFieldNoSuggestion", SET(["color"], "red"),
                "unknown field 'color' (accepted: "},
        // name
        BadCase{"NameMissing", ERASE(, "name"), "name: missing (required)"},
        BadCase{"NameWrongType", SET(["name"], 5), "name: must be a string (got 5)"},
        BadCase{"NameUppercase", SET(["name"], "Pretrain"),
                "name: must match [a-z0-9][a-z0-9._-]{0,62} (got \"Pretrain\")"},
        BadCase{"NameEmpty", SET(["name"], ""), "name: must match"},
        BadCase{"NameLeadingDash", SET(["name"], "-x"), "name: must match"},
        BadCase{"NameSlash", SET(["name"], "a/b"), "name: must match"},
        BadCase{"NameTooLong", SET(["name"], std::string(64, 'a')), "name: must match"},
        // gpu
        BadCase{"GpuMissing", ERASE(, "gpu"), "gpu: missing (required)"},
        BadCase{"GpuWrongType", SET(["gpu"], json::array({"gpu0"})),
                "gpu: must be a string (got an array)"},
        BadCase{"GpuUnknown", SET(["gpu"], "gpu9"),
                "gpu: unknown GPU \"gpu9\" (known: gpu0, gpu1)"},
        // buffer_bytes
        BadCase{"BufferMissing", ERASE(, "buffer_bytes"), "buffer_bytes: missing (required)"},
        BadCase{"BufferZero", SET(["buffer_bytes"], 0),
                "buffer_bytes: must be in 32..68719476736 (got 0)"},
        BadCase{"BufferTooBig", SET(["buffer_bytes"], (64ull << 30) + 32),
                "buffer_bytes: must be in 32..68719476736"},
        BadCase{"BufferNotMultipleOf32", SET(["buffer_bytes"], 100),
                "buffer_bytes: must be a multiple of 32 (got 100)"},
        BadCase{"BufferFraction", SET(["buffer_bytes"], 1.5),
                "buffer_bytes: must be an integer (got 1.5)"},
        BadCase{"BufferWholeFloat", SET(["buffer_bytes"], 64.0),
                "buffer_bytes: must be an integer (got 64.0)"},
        BadCase{"BufferString", SET(["buffer_bytes"], "8"),
                "buffer_bytes: must be an integer (got \"8\")"},
        BadCase{"BufferNegative", SET(["buffer_bytes"], -32),
                "buffer_bytes: must be a non-negative integer (got -32)"},
        BadCase{"BufferBool", SET(["buffer_bytes"], true),
                "buffer_bytes: must be an integer (got true)"},
        BadCase{"BufferHuge", SET(["buffer_bytes"], 1e30), "buffer_bytes: must be an integer"},
        // chunk_bytes
        BadCase{"ChunkZero", SET(["chunk_bytes"], 0), "chunk_bytes: must be in 32..67108864 (got 0)"},
        BadCase{"ChunkTooBig", SET(["chunk_bytes"], (64u << 20) + 32),
                "chunk_bytes: must be in 32..67108864"},
        BadCase{"ChunkNotMultipleOf32", SET(["chunk_bytes"], 48),
                "chunk_bytes: must be a multiple of 32 (got 48)"},
        BadCase{"ChunkFraction", SET(["chunk_bytes"], 32.5), "chunk_bytes: must be an integer"},
        BadCase{"ChunkNull", SET(["chunk_bytes"], nullptr),
                "chunk_bytes: must be an integer (got null)"},
        // rounds
        BadCase{"RoundsZero", SET(["rounds"], 0), "rounds: must be in 1..1000000 (got 0)"},
        BadCase{"RoundsTooMany", SET(["rounds"], 1000001), "rounds: must be in 1..1000000"},
        BadCase{"RoundsString", SET(["rounds"], "2"), "rounds: must be an integer (got \"2\")"},
        BadCase{"RoundsNegative", SET(["rounds"], -1), "rounds: must be a non-negative integer"},
        // schedule
        BadCase{"ScheduleUnknown", SET(["schedule"], "fifo"),
                "schedule: must be one of round-robin, proportional (got \"fifo\")"},
        BadCase{"ScheduleWrongType", SET(["schedule"], 1),
                "schedule: must be one of round-robin, proportional (got 1)"},
        // holder_timeout_seconds
        BadCase{"TimeoutZero", SET(["holder_timeout_seconds"], 0),
                "holder_timeout_seconds: must be > 0 and <= 86400 (got 0)"},
        BadCase{"TimeoutNegative", SET(["holder_timeout_seconds"], -5),
                "holder_timeout_seconds: must be > 0 and <= 86400"},
        BadCase{"TimeoutTooLong", SET(["holder_timeout_seconds"], 86400.5),
                "holder_timeout_seconds: must be > 0 and <= 86400 (got 86400.5)"},
        BadCase{"TimeoutString", SET(["holder_timeout_seconds"], "60"),
                "holder_timeout_seconds: must be a number (got \"60\")"},
        // on_holder_failure
        BadCase{"FailurePolicyUnknown", SET(["on_holder_failure"], "retry"),
                "on_holder_failure: must be one of skip, pause (got \"retry\")"},
        BadCase{"FailurePolicyWrongType", SET(["on_holder_failure"], false),
                "on_holder_failure: must be one of skip, pause (got false)"},
        // holders
        BadCase{"HoldersMissing", ERASE(, "holders"), "holders: missing (required)"},
        BadCase{"HoldersWrongType", SET(["holders"], json::object()),
                "holders: must be an array (got an object)"},
        BadCase{"HoldersEmpty", SET(["holders"], json::array()),
                "holders: must have 1..256 entries (got 0)"},
        BadCase{"HoldersTooMany",
                [](json& j) {
                  json h = j["holders"][0];
                  j["holders"] = json::array();
                  for (int i = 0; i < 257; ++i) j["holders"].push_back(h);
                },
                "holders: must have 1..256 entries (got 257)"},
        BadCase{"HolderNotObject", SET(["holders"][1], "hospital-b"),
                "holders[1]: must be an object (got \"hospital-b\")"},
        BadCase{"HolderUnknownField",
                [](json& j) {
                  H(j, 0)["endpiont"] = H(j, 0)["endpoint"];
                  H(j, 0).erase("endpoint");
                },
                "holders[0]: unknown field 'endpiont' (did you mean 'endpoint'? accepted: "
                "dataset, domain, endpoint, name)"},
        // holders[].name
        BadCase{"HolderNameMissing", ERASE(["holders"][2], "name"),
                "holders[2].name: missing (required)"},
        BadCase{"HolderNameWrongType", SET(["holders"][1]["name"], 7),
                "holders[1].name: must be a string (got 7)"},
        BadCase{"HolderNameBadCharset", SET(["holders"][1]["name"], "Hospital B"),
                "holders[1].name: must match [a-z0-9][a-z0-9._-]{0,62} (got \"Hospital B\")"},
        BadCase{"HolderNameDuplicate", SET(["holders"][2]["name"], "hospital-a"),
                "holders[2].name: \"hospital-a\" is already used by holders[0]"},
        // holders[].endpoint
        BadCase{"EndpointMissing", ERASE(["holders"][1], "endpoint"),
                "holders[1].endpoint: missing (required)"},
        BadCase{"EndpointWrongType", SET(["holders"][1]["endpoint"], 50051),
                "holders[1].endpoint: must be a string (got 50051)"},
        BadCase{"EndpointEmpty", SET(["holders"][1]["endpoint"], ""),
                "holders[1].endpoint: must be \"unix:/abs/path\" or \"host:port\" (got \"\")"},
        BadCase{"EndpointUnixRelative", SET(["holders"][0]["endpoint"], "unix:run/a.sock"),
                "holders[0].endpoint: unix endpoint needs an absolute path"},
        BadCase{"EndpointUnixNoFile", SET(["holders"][0]["endpoint"], "unix:/"),
                "holders[0].endpoint: unix endpoint must name a socket file"},
        BadCase{"EndpointUnixTooLong",
                SET(["holders"][0]["endpoint"], "unix:/" + std::string(107, 'x')),
                "holders[0].endpoint: unix socket path is longer than 107 bytes"},
        BadCase{"EndpointNoPort", SET(["holders"][1]["endpoint"], "localhost"),
                "holders[1].endpoint: must be \"unix:/abs/path\" or \"host:port\" (got \"localhost\")"},
        BadCase{"EndpointEmptyPort", SET(["holders"][1]["endpoint"], "localhost:"),
                "holders[1].endpoint: port must be 1..65535 (got \"localhost:\")"},
        BadCase{"EndpointPortZero", SET(["holders"][1]["endpoint"], "localhost:0"),
                "holders[1].endpoint: port must be 1..65535"},
        BadCase{"EndpointPortTooBig", SET(["holders"][1]["endpoint"], "localhost:65536"),
                "holders[1].endpoint: port must be 1..65535"},
        BadCase{"EndpointPortName", SET(["holders"][1]["endpoint"], "localhost:http"),
                "holders[1].endpoint: port must be 1..65535"},
        BadCase{"EndpointEmptyHost", SET(["holders"][1]["endpoint"], ":50051"),
                "holders[1].endpoint: missing host before :port"},
        BadCase{"EndpointBadHostChars", SET(["holders"][1]["endpoint"], "a@b:1"),
                "holders[1].endpoint: host has invalid characters"},
        BadCase{"EndpointIpv6Unbracketed", SET(["holders"][1]["endpoint"], "fd00::2:50051"),
                "holders[1].endpoint: IPv6 addresses must be in brackets"},
        BadCase{"EndpointIpv6Unclosed", SET(["holders"][1]["endpoint"], "[fd00::2:50051"),
                "holders[1].endpoint: IPv6 address has no closing ']'"},
        BadCase{"EndpointIpv6NoPort", SET(["holders"][1]["endpoint"], "[fd00::2]"),
                "holders[1].endpoint: missing :port after ]"},
        BadCase{"EndpointIpv6Garbage", SET(["holders"][1]["endpoint"], "[host]:1"),
                "holders[1].endpoint: invalid IPv6 address in brackets"},
        BadCase{"EndpointOtherScheme", SET(["holders"][1]["endpoint"], "dns:///h:1"),
                "holders[1].endpoint: must be \"unix:/abs/path\" or \"host:port\""},
        BadCase{"EndpointWhitespace", SET(["holders"][1]["endpoint"], "host :1"),
                "holders[1].endpoint: must not contain whitespace or control characters"},
        BadCase{"EndpointDuplicate", SET(["holders"][1]["endpoint"], "unix:/run/a.sock"),
                "holders[1].endpoint: \"unix:/run/a.sock\" is already used by holders[0]"},
        // holders[].domain
        BadCase{"DomainMissing", ERASE(["holders"][0], "domain"),
                "holders[0].domain: missing (required)"},
        BadCase{"DomainWrongType", SET(["holders"][0]["domain"], nullptr),
                "holders[0].domain: must be a string (got null)"},
        BadCase{"DomainEmpty", SET(["holders"][0]["domain"], ""),
                "holders[0].domain: must be a non-empty TD name without whitespace (got \"\")"},
        BadCase{"DomainWhitespace", SET(["holders"][0]["domain"], "td a"),
                "holders[0].domain: must be a non-empty TD name without whitespace"},
        BadCase{"DomainReservedOrchestrator", SET(["holders"][1]["domain"], "td-orchestrator"),
                "holders[1].domain: \"td-orchestrator\" is reserved"},
        BadCase{"DomainReservedMux", SET(["holders"][2]["domain"], "td-mux"),
                "holders[2].domain: \"td-mux\" is reserved"},
        BadCase{"DomainDuplicate", SET(["holders"][2]["domain"], "td-hospital-b"),
                "holders[2].domain: \"td-hospital-b\" is already used by holders[1]"},
        // holders[].dataset
        BadCase{"DatasetMissing", ERASE(["holders"][2], "dataset"),
                "holders[2].dataset: missing (required)"},
        BadCase{"DatasetWrongType", SET(["holders"][2]["dataset"], "notes"),
                "holders[2].dataset: must be an object (got \"notes\")"},
        BadCase{"DatasetUnknownField", SET(["holders"][2]["dataset"]["fromat"], "raw"),
                "holders[2].dataset: unknown field 'fromat' (did you mean 'format'? "
                "accepted: format, name)"},
        BadCase{"DatasetNameMissing", ERASE(["holders"][2]["dataset"], "name"),
                "holders[2].dataset.name: missing (required)"},
        BadCase{"DatasetNameWrongType", SET(["holders"][2]["dataset"]["name"], 3),
                "holders[2].dataset.name: must be a string (got 3)"},
        BadCase{"DatasetNameEmpty", SET(["holders"][2]["dataset"]["name"], ""),
                "holders[2].dataset.name: must be 1..256 bytes without whitespace"},
        BadCase{"DatasetNameWhitespace", SET(["holders"][2]["dataset"]["name"], "my notes"),
                "holders[2].dataset.name: must be 1..256 bytes without whitespace"},
        BadCase{"DatasetFormatUnknown", SET(["holders"][2]["dataset"]["format"], "csv"),
                "holders[2].dataset.format: must be one of auto, llmc-tokens, raw (got \"csv\")"},
        BadCase{"DatasetFormatWrongType", SET(["holders"][2]["dataset"]["format"], 1),
                "holders[2].dataset.format: must be one of auto, llmc-tokens, raw (got 1)"},
        // trainer
        BadCase{"TrainerWrongType", SET(["trainer"], "next-token"),
                "trainer: must be an object (got \"next-token\")"},
        BadCase{"TrainerUnknownField", SET(["trainer"]["lr"], 0.1),
                "trainer: unknown field 'lr' (accepted: batch_tokens, dim, identity, kind, "
                "learning_rate, on_failure, release_timeout_seconds, seed, timeout_seconds, "
                "vocab)"},
        BadCase{"TrainerKindUnknown", SET(["trainer"]["kind"], "gpt2"),
                "trainer.kind: must be one of next-token, none, external (got \"gpt2\")"},
        BadCase{"TrainerVocabTooSmall", SET(["trainer"]["vocab"], 1),
                "trainer.vocab: must be in 2..65536 (got 1)"},
        BadCase{"TrainerVocabTooBig", SET(["trainer"]["vocab"], 65537),
                "trainer.vocab: must be in 2..65536 (got 65537)"},
        BadCase{"TrainerVocabFraction", SET(["trainer"]["vocab"], 512.5),
                "trainer.vocab: must be an integer (got 512.5)"},
        BadCase{"TrainerDimZero", SET(["trainer"]["dim"], 0), "trainer.dim: must be in 1..1024 (got 0)"},
        BadCase{"TrainerCheckpointTooBigToStore",
                SET(["trainer"], json({{"vocab", 65536}, {"dim", 640}})),
                "trainer: a model of vocab 65536 and dim 640 has a checkpoint of 1007419448 "
                "bytes, more than the 900000000 the orchestrator's database stores in one "
                "value (24 x vocab x dim + 12 x vocab bytes): use a smaller vocab or dim"},
        BadCase{"TrainerDimTooBig", SET(["trainer"]["dim"], 1025),
                "trainer.dim: must be in 1..1024 (got 1025)"},
        BadCase{"TrainerLearningRateZero", SET(["trainer"]["learning_rate"], 0),
                "trainer.learning_rate: must be > 0 and <= 100 (got 0)"},
        BadCase{"TrainerLearningRateTooBig", SET(["trainer"]["learning_rate"], 100.5),
                "trainer.learning_rate: must be > 0 and <= 100 (got 100.5)"},
        BadCase{"TrainerLearningRateString", SET(["trainer"]["learning_rate"], "0.1"),
                "trainer.learning_rate: must be a number (got \"0.1\")"},
        BadCase{"TrainerBatchTooSmall", SET(["trainer"]["batch_tokens"], 1),
                "trainer.batch_tokens: must be in 2..16777216 (got 1)"},
        BadCase{"TrainerBatchTooBig", SET(["trainer"]["batch_tokens"], 16777217),
                "trainer.batch_tokens: must be in 2..16777216 (got 16777217)"},
        BadCase{"TrainerSeedNegative", SET(["trainer"]["seed"], -1),
                "trainer.seed: must be a non-negative integer (got -1)"},
        BadCase{"TrainerSeedFraction", SET(["trainer"]["seed"], 1.5),
                "trainer.seed: must be an integer (got 1.5)"},
        BadCase{"TrainerSeedString", SET(["trainer"]["seed"], "1"),
                "trainer.seed: must be an integer (got \"1\")"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

#undef SET
#undef ERASE

}  // namespace
}  // namespace gputravel

namespace gputravel {
namespace {

// The example shipped in deploy/examples is a valid campaign.
TEST(CampaignSpecExampleTest, DeployExampleParses) {
  std::ifstream in("deploy/examples/campaign-hospitals.json");
  std::stringstream ss;
  ss << in.rdbuf();
  SpecOptions opts;
  opts.known_gpus = {"gpu0"};
  opts.reserved_domains = {"orchestrator"};
  auto spec = ParseCampaignSpecText(ss.str(), "campaign-hospitals.json: ", opts);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->holders.size(), 2u);
  EXPECT_EQ(spec->schedule, SchedulePolicy::kProportional);
}

}  // namespace
}  // namespace gputravel
