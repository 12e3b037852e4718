#include "auth/identity_cache.h"

#include "auth/pki.h"
#include "auth/test_server.h"
#include "gtest/gtest.h"
#include "keyxfer/x509.h"
#include "util/files.h"

namespace gputravel {
namespace {

class IdentityCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(InitCampaignCa(dir_.path(), "trial", 30).ok()); }
  std::string Issue(const Identity& id) {
    absl::StatusOr<IssuedFiles> files = IssueIdentity(dir_.path(), id, 10);
    EXPECT_TRUE(files.ok()) << files.status();
    if (!files.ok()) return "";
    return *ReadFile(files->cert);
  }
  TempDir dir_;
};

TEST_F(IdentityCacheTest, SameAnswerAsParsingEveryTime) {
  IdentityCache cache;
  const Identity a{"holder", "hospital-a"}, b{"holder", "hospital-b"};
  const std::string pem_a = Issue(a), pem_b = Issue(b);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Identity> got_a = cache.Get(pem_a);
    ASSERT_TRUE(got_a.ok()) << got_a.status();
    EXPECT_EQ(*got_a, a);
    absl::StatusOr<Identity> got_b = cache.Get(pem_b);
    ASSERT_TRUE(got_b.ok()) << got_b.status();
    EXPECT_EQ(*got_b, b);
  }
  EXPECT_EQ(cache.size(), 2u);
  // The same certificate in DER is other bytes: its own entry, same identity.
  absl::StatusOr<std::string> der = CertificatePemToDer(pem_a);
  ASSERT_TRUE(der.ok());
  absl::StatusOr<Identity> from_der = cache.Get(*der);
  ASSERT_TRUE(from_der.ok());
  EXPECT_EQ(*from_der, a);
  EXPECT_EQ(cache.size(), 3u);
}

TEST_F(IdentityCacheTest, FailuresAreNotCachedAndSayWhy) {
  IdentityCache cache;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<Identity> id = cache.Get("not a certificate");
    ASSERT_FALSE(id.ok());
    EXPECT_NE(id.status().message().find("not a PEM or DER X.509 certificate"),
              std::string::npos)
        << id.status();
  }
  // The CA certificate is a certificate but not an identity.
  EXPECT_FALSE(cache.Get(*ReadFile(CaCertPath(dir_.path()))).ok());
  EXPECT_EQ(cache.size(), 0u);
}

TEST_F(IdentityCacheTest, BoundedByCapacity) {
  IdentityCache cache(2);
  const std::string p1 = Issue({"holder", "h1"}), p2 = Issue({"holder", "h2"}),
                    p3 = Issue({"holder", "h3"});
  ASSERT_TRUE(cache.Get(p1).ok());
  ASSERT_TRUE(cache.Get(p2).ok());
  EXPECT_EQ(cache.size(), 2u);
  absl::StatusOr<Identity> third = cache.Get(p3);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->name, "h3");
  EXPECT_LE(cache.size(), 2u);
  // Evicted entries are parsed again, with the same answer.
  absl::StatusOr<Identity> first = cache.Get(p1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->name, "h1");
  EXPECT_LE(cache.size(), 2u);
}

}  // namespace
}  // namespace gputravel
