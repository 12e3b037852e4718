#include "auth/pki_command.h"

#include <sys/stat.h>

#include <string>
#include <vector>

#include "auth/test_server.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "util/files.h"

namespace gputravel {
namespace {

struct Result {
  int code;
  std::string out;
  std::string err;
};

// Runs `gputravel pki ARGS...` in-process, capturing stdout and stderr.
Result Pki(std::vector<std::string> args) {
  args.insert(args.begin(), {"gputravel", "pki"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  int code = PkiCommand(static_cast<int>(args.size()), argv.data());
  fflush(stdout);
  fflush(stderr);
  Result r{code, testing::internal::GetCapturedStdout(), testing::internal::GetCapturedStderr()};
  return r;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

class PkiCommandTest : public ::testing::Test {
 protected:
  std::string Dir() const { return tmp_.path() + "/pki"; }
  TempDir tmp_;
};

TEST_F(PkiCommandTest, Help) {
  Result r = Pki({});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Contains(r.err, "missing subcommand")) << r.err;
  r = Pki({"--help"});
  EXPECT_EQ(r.code, 0);
  for (const char* s : {"init", "issue", "csr", "sign", "revoke", "crl", "show",
                        "orchestrator, holder, operator, scheduler, mux, trainer"}) {
    EXPECT_TRUE(Contains(r.out, s)) << s << "\n" << r.out;
  }
  r = Pki({"frobnicate"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Contains(r.err, "unknown subcommand 'frobnicate'")) << r.err;
  r = Pki({"init", "--help"});
  EXPECT_EQ(r.code, 0);
  for (const char* s : {"Usage: gputravel pki init", "--dir", "--campaign", "--days", "3650"}) {
    EXPECT_TRUE(Contains(r.out, s)) << s << "\n" << r.out;
  }
  r = Pki({"issue", "--help"});
  EXPECT_EQ(r.code, 0);
  for (const char* s : {"Usage: gputravel pki issue", "--dir", "--role", "--name", "--days",
                        "<name>.<role>.gputravel", "mux"}) {
    EXPECT_TRUE(Contains(r.out, s)) << s << "\n" << r.out;
  }
  r = Pki({"show", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(Contains(r.out, "--cert"));
  EXPECT_TRUE(Contains(r.out, "--json"));
}

TEST_F(PkiCommandTest, UsageErrors) {
  Result r = Pki({"init", "--campaign", "c"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Contains(r.err, "--dir is required")) << r.err;
  r = Pki({"init", "--dir", Dir(), "--campaign", "c", "--days", "ten"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Contains(r.err, "--days must be an integer in 1..36500, not 'ten'")) << r.err;
  r = Pki({"init", "--dir", Dir(), "--campaign", "c", "--colour", "red"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Contains(r.err, "unknown flag --colour")) << r.err;
  r = Pki({"init", "--dir", Dir(), "--campaign", "c", "extra"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Contains(r.err, "unexpected argument 'extra'")) << r.err;
  r = Pki({"init", "--dir", Dir(), "--campaign", "Big Trial"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Contains(r.err, "invalid name 'Big Trial'")) << r.err;
  struct stat st;
  EXPECT_NE(stat(Dir().c_str(), &st), 0) << "nothing may be created on a usage error";
  r = Pki({"issue", "--dir", Dir(), "--role", "admin", "--name", "x"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Contains(r.err, "--role: unknown role 'admin'")) << r.err;
  r = Pki({"issue", "--dir", Dir(), "--role", "holder", "--name", "-x"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Contains(r.err, "--name: invalid name '-x'")) << r.err;
  r = Pki({"issue", "--dir", Dir(), "--role", "holder"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Contains(r.err, "--name is required")) << r.err;
  r = Pki({"show"});
  EXPECT_EQ(r.code, 2);
}

TEST_F(PkiCommandTest, InitIssueShow) {
  Result r = Pki({"init", "--dir", Dir(), "--campaign", "trial-7", "--days", "90"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "Wrote " + Dir() + "/ca.pem\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "Wrote " + Dir() + "/ca.key (private key, mode 0600)")) << r.out;
  EXPECT_FALSE(Contains(r.out, "PRIVATE KEY"));

  r = Pki({"init", "--dir", Dir(), "--campaign", "trial-7"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(Contains(r.err, "already exists; refusing to overwrite")) << r.err;

  r = Pki({"issue", "--dir", Dir(), "--role", "holder", "--name", "hospital-a", "--days=30"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "Wrote " + Dir() + "/holder-hospital-a.pem\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "Wrote " + Dir() + "/holder-hospital-a.key (private key, mode 0600)"))
      << r.out;
  EXPECT_TRUE(Contains(r.out, "hospital-a.holder.gputravel")) << r.out;
  EXPECT_FALSE(Contains(r.out, "PRIVATE KEY"));

  r = Pki({"issue", "--dir", Dir(), "--role", "holder", "--name", "hospital-a"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(Contains(r.err, "holder-hospital-a.pem already exists")) << r.err;

  r = Pki({"issue", "--dir", Dir(), "--role", "mux", "--name", "host1", "--days", "365"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(Contains(r.err, "outlasts the campaign CA")) << r.err;

  r = Pki({"show", "--cert", Dir() + "/holder-hospital-a.pem"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"role:        holder\n", "name:        hospital-a\n",
                        "server name: hospital-a.holder.gputravel\n",
                        "issuer:      CN=trial-7,OU=campaign-ca,O=gputravel\n", "not after:   20"}) {
    EXPECT_TRUE(Contains(r.out, s)) << s << "\n" << r.out;
  }

  r = Pki({"show", "--cert", Dir() + "/holder-hospital-a.pem", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["role"], "holder");
  EXPECT_EQ(j["name"], "hospital-a");
  EXPECT_EQ(j["ca"], false);
  EXPECT_EQ(j["issuer"], "CN=trial-7,OU=campaign-ca,O=gputravel");
  EXPECT_EQ(j["server_name"], "hospital-a.holder.gputravel");
  EXPECT_EQ(j["not_after"].get<std::string>().size(), 20u);

  r = Pki({"show", "--cert", Dir() + "/ca.pem", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_EQ(j["ca"], true);
  EXPECT_EQ(j["role"], "ca");

  r = Pki({"show", "--cert", Dir() + "/nope.pem"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(Contains(r.err, "cannot read " + Dir() + "/nope.pem")) << r.err;
  r = Pki({"show", "--cert", Dir() + "/holder-hospital-a.key"});
  EXPECT_EQ(r.code, 1);
  EXPECT_FALSE(Contains(r.err, "PRIVATE KEY"));
}

// The key is made in the TD (csr), only the request goes to the CA (sign),
// and the CA can revoke the identity (revoke) and republish (crl).
TEST_F(PkiCommandTest, CsrSignRevokeCrl) {
  for (const char* sub : {"csr", "sign", "revoke", "crl"}) {
    Result r = Pki({sub, "--help"});
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_TRUE(Contains(r.out, std::string("Usage: gputravel pki ") + sub)) << r.out;
  }
  EXPECT_TRUE(Contains(Pki({"csr", "--help"}).out, "never needs to leave"));
  EXPECT_TRUE(Contains(Pki({"sign", "--help"}).out, "any extension it asks for is ignored"));
  EXPECT_TRUE(Contains(Pki({"revoke", "--help"}).out, "tls.crl"));
  ASSERT_EQ(Pki({"init", "--dir", Dir(), "--campaign", "c"}).code, 0);
  const std::string td = tmp_.path() + "/td";
  Result r = Pki({"csr", "--out", td, "--role", "holder", "--name", "hospital-a"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "Wrote " + td + "/holder-hospital-a.key (private key, mode 0600"))
      << r.out;
  EXPECT_FALSE(Contains(r.out, "PRIVATE KEY"));
  EXPECT_EQ(Pki({"csr", "--out", td, "--role", "admin", "--name", "x"}).code, 2);

  // Signed as what the CA's operator says; another identity is refused.
  r = Pki({"sign", "--dir", Dir(), "--csr", td + "/holder-hospital-a.csr", "--role",
           "orchestrator", "--name", "hospital-a"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(Contains(r.err, "but you are signing orchestrator 'hospital-a'")) << r.err;
  r = Pki({"sign", "--dir", Dir(), "--csr", td + "/holder-hospital-a.csr", "--role", "holder",
           "--name", "hospital-a", "--days", "30"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "Wrote " + Dir() + "/holder-hospital-a.pem")) << r.out;
  struct stat st;
  EXPECT_NE(stat((Dir() + "/holder-hospital-a.key").c_str(), &st), 0) << "no key at the CA";

  r = Pki({"revoke", "--dir", Dir(), "--role", "holder", "--name", "hospital-a"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "Revoked certificate ")) << r.out;
  EXPECT_TRUE(Contains(r.out, "CRL number 2, 1 revoked certificate(s)")) << r.out;
  r = Pki({"revoke", "--dir", Dir(), "--role", "holder", "--name", "nobody"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(Contains(r.err, "signed no certificate for holder 'nobody'")) << r.err;
  r = Pki({"crl", "--dir", Dir(), "--days", "7"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "CRL number 3, 1 revoked certificate(s)")) << r.out;
}

// The host's side of the two trust domains: the MUX's TLS files and the
// certificates to pin, never the CA's key.
TEST_F(PkiCommandTest, MuxKitWritesTheHostsSideWithoutTheCaKey) {
  ASSERT_EQ(Pki({"init", "--dir", Dir(), "--campaign", "c"}).code, 0);
  for (const char* role : {"mux", "orchestrator", "operator"}) {
    ASSERT_EQ(Pki({"issue", "--dir", Dir(), "--role", role, "--name", role}).code, 0);
  }
  const std::string out = tmp_.path() + "/kit";
  Result r = Pki({"mux-kit", "--dir", Dir(), "--out", out, "--callers",
                  "orchestrator/orchestrator,operator/operator"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* f : {"/pki/ca.pem", "/pki/crl.pem", "/pki/mux-mux.pem", "/pki/mux-mux.key",
                        "/mux-callers/orchestrator-orchestrator.pem",
                        "/mux-callers/operator-operator.pem", "/mux-fragment.json"}) {
    EXPECT_TRUE(ReadFile(out + f).ok()) << f;
  }
  struct stat st;
  ASSERT_EQ(::stat((out + "/pki/mux-mux.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0u);
  EXPECT_EQ(*ReadFile(out + "/mux-callers/orchestrator-orchestrator.pem"),
            *ReadFile(Dir() + "/orchestrator-orchestrator.pem"));
  auto fragment = nlohmann::json::parse(*ReadFile(out + "/mux-fragment.json"));
  EXPECT_EQ(fragment["callers"][0], "/etc/gputravel/mux-callers/orchestrator-orchestrator.pem");
  EXPECT_EQ(fragment["tls"]["crl"], "/etc/gputravel/pki/crl.pem");
  const std::string ca_key = *ReadFile(Dir() + "/ca.key");
  for (const char* f : {"/pki/ca.pem", "/pki/mux-mux.pem", "/pki/mux-mux.key"}) {
    EXPECT_NE(*ReadFile(out + f), ca_key) << f;
  }
  EXPECT_FALSE(ReadFile(out + "/pki/ca.key").ok());
  // Only orchestrators and operators can be pinned; an existing kit is kept.
  r = Pki({"mux-kit", "--dir", Dir(), "--out", tmp_.path() + "/kit2", "--callers", "holder/h"});
  EXPECT_EQ(r.code, 2) << r.err;
  r = Pki({"mux-kit", "--dir", Dir(), "--out", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(Contains(r.err, "must not exist yet")) << r.err;
}

TEST_F(PkiCommandTest, IssueWithoutCaFails) {
  Result r = Pki({"issue", "--dir", Dir(), "--role", "operator", "--name", "alice"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(Contains(r.err, "no campaign CA in " + Dir())) << r.err;
  EXPECT_TRUE(Contains(r.err, "gputravel pki init --dir " + Dir())) << r.err;
}

TEST_F(PkiCommandTest, ShowJsonSurvivesInvalidUtf8) {
  Result r = Pki({"init", "--dir", Dir(), "--campaign", "trial"});
  ASSERT_EQ(r.code, 0) << r.err;
  // A file name that is not UTF-8 (Latin-1 "\xe9", then a stray byte).
  const std::string path = tmp_.path() + "/caf\xe9-\xff.pem";
  ASSERT_TRUE(WriteFile(path, *ReadFile(Dir() + "/ca.pem")).ok());
  r = Pki({"show", "--cert", path, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["ca"], true);
  EXPECT_EQ(j["file"], tmp_.path() + "/caf\xef\xbf\xbd-\xef\xbf\xbd.pem")
      << "invalid bytes become U+FFFD";
}

}  // namespace
}  // namespace gputravel
