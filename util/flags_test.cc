#include "util/flags.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

// Parses `args` (program name first) with a switch --json and a value --trips.
absl::Status Parse(Flags* f, std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(&a[0]);
  return f->Parse(static_cast<int>(argv.size()), argv.data());
}

Flags Declared() {
  Flags f("prog", "Does things.");
  f.Bool("json", "Print JSON.");
  f.String("trips", "100", "How many trips.");
  return f;
}

TEST(FlagsTest, ValuesSwitchesAndPositionals) {
  Flags f = Declared();
  ASSERT_TRUE(Parse(&f, {"prog", "--json", "--trips", "7", "extra"}).ok());
  EXPECT_TRUE(f.IsSet("json"));
  EXPECT_EQ(f.Get("trips"), "7");
  EXPECT_EQ(f.GetInt("trips"), 7);
  EXPECT_EQ(f.positional(), std::vector<std::string>{"extra"});
  Flags g = Declared();
  ASSERT_TRUE(Parse(&g, {"prog", "--trips=9"}).ok());
  EXPECT_FALSE(g.IsSet("json"));
  EXPECT_EQ(g.Get("trips"), "9");
  Flags d = Declared();
  ASSERT_TRUE(Parse(&d, {"prog"}).ok());
  EXPECT_EQ(d.Get("trips"), "100") << "the default";
  EXPECT_FALSE(d.IsSet("trips"));
}

TEST(FlagsTest, OnePositionalNamesWhatIsMissingOrTooMuch) {
  Flags one = Declared();
  ASSERT_TRUE(Parse(&one, {"prog", "DIR", "--json"}).ok());
  EXPECT_TRUE(one.OnePositional("the directory DIR").ok());
  Flags none = Declared();
  ASSERT_TRUE(Parse(&none, {"prog", "--json"}).ok());
  EXPECT_EQ(none.OnePositional("the directory DIR").message(), "missing the directory DIR");
  Flags two = Declared();
  ASSERT_TRUE(Parse(&two, {"prog", "a", "b"}).ok());
  EXPECT_EQ(two.OnePositional("the directory DIR").message(),
            "one argument only (the directory DIR), not 'b' as well");
}

TEST(FlagsTest, SwitchesTakeOnlyTrueOrFalse) {
  Flags t = Declared();
  ASSERT_TRUE(Parse(&t, {"prog", "--json=true"}).ok());
  EXPECT_TRUE(t.IsSet("json"));
  Flags f = Declared();
  ASSERT_TRUE(Parse(&f, {"prog", "--json=false"}).ok());
  EXPECT_FALSE(f.IsSet("json"));
  for (const char* bad : {"--json=1", "--json=yes", "--json="}) {
    Flags b = Declared();
    absl::Status s = Parse(&b, {"prog", bad});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("--json"), absl::string_view::npos) << s;
  }
}

TEST(FlagsTest, UnknownFlagsAndMissingValuesAreErrors) {
  Flags u = Declared();
  absl::Status s = Parse(&u, {"prog", "--jsn"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--jsn"), absl::string_view::npos) << s;
  Flags m = Declared();
  s = Parse(&m, {"prog", "--trips"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("needs a value"), absl::string_view::npos) << s;
}

TEST(FlagsTest, HelpListsEveryFlagWithItsDefault) {
  Flags f = Declared();
  ASSERT_TRUE(Parse(&f, {"prog", "--help"}).ok());
  EXPECT_TRUE(f.help_requested());
  const std::string h = f.Help();
  EXPECT_NE(h.find("Usage: prog"), std::string::npos) << h;
  EXPECT_NE(h.find("Does things."), std::string::npos) << h;
  EXPECT_NE(h.find("--json\n      Print JSON."), std::string::npos) << h;
  EXPECT_NE(h.find("--trips=VALUE\n      How many trips. (default: 100)"), std::string::npos) << h;
}

Flags WithInts() {
  Flags f("prog", "Does things.");
  f.Int("holders", 3, 1, 16, "Number of holders.");
  f.Int("v", 1, 0, 3, "Verbosity.");
  f.String("name", "x", "A name.");
  return f;
}

TEST(FlagsTest, IntFlagsParseStrictlyWithinRange) {
  Flags d = WithInts();
  ASSERT_TRUE(Parse(&d, {"prog"}).ok());
  EXPECT_EQ(d.GetInt("holders"), 3) << "the default";
  EXPECT_EQ(d.GetInt("v"), 1);
  Flags f = WithInts();
  ASSERT_TRUE(Parse(&f, {"prog", "--holders=16", "--v", "0"}).ok());
  EXPECT_EQ(f.GetInt("holders"), 16);
  EXPECT_EQ(f.GetInt("v"), 0);
  EXPECT_TRUE(f.IsSet("holders"));
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"prog", "--holders=3x"},
        std::vector<std::string>{"prog", "--holders=0"},
        std::vector<std::string>{"prog", "--holders=17"},
        std::vector<std::string>{"prog", "--holders=-1"},
        std::vector<std::string>{"prog", "--holders="},
        std::vector<std::string>{"prog", "--holders=1.5"},
        std::vector<std::string>{"prog", "--holders=99999999999999999999"},
        std::vector<std::string>{"prog", "--holders", "three"},
        std::vector<std::string>{"prog", "--v=debug"}}) {
    Flags b = WithInts();
    absl::Status s = Parse(&b, bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad.back();
    const std::string flag = bad.back().find("--v") == 0 ? "--v" : "--holders";
    EXPECT_NE(s.message().find("flag " + flag + " must be an integer in "),
              absl::string_view::npos)
        << s;
  }
  Flags m = WithInts();
  absl::Status s = Parse(&m, {"prog", "--holders=3x"});
  EXPECT_EQ(std::string(s.message()), "flag --holders must be an integer in 1..16, not '3x'");
  Flags v = WithInts();
  s = Parse(&v, {"prog", "--v=debug"});
  EXPECT_EQ(std::string(s.message()), "flag --v must be an integer in 0..3, not 'debug'");
}

TEST(FlagsTest, GetIntOfAStringFlagIsStrict) {
  Flags f = WithInts();
  ASSERT_TRUE(Parse(&f, {"prog", "--name=42"}).ok());
  EXPECT_EQ(f.GetInt("name"), 42);
  for (const char* bad : {"--name=3x", "--name=debug", "--name="}) {
    Flags b = WithInts();
    ASSERT_TRUE(Parse(&b, {"prog", bad}).ok()) << "a string flag takes any value";
    EXPECT_EQ(b.GetInt("name"), 0) << bad;
  }
  Flags t = Declared();
  ASSERT_TRUE(Parse(&t, {"prog", "--trips=-7"}).ok());
  EXPECT_EQ(t.GetInt("trips"), -7);
}

TEST(FlagsTest, HelpShowsIntRangeAndDefault) {
  Flags f = WithInts();
  const std::string h = f.Help();
  EXPECT_NE(h.find("--holders=N\n      Number of holders. (1..16, default: 3)"),
            std::string::npos)
      << h;
}

}  // namespace
}  // namespace gputravel
