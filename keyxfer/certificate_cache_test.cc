#include "keyxfer/certificate_cache.h"

#include "gtest/gtest.h"
#include "keyxfer/ec_key.h"

namespace gputravel {
namespace {

struct Ca {
  EcKey key;
  std::string der;
};

Ca MakeCa(const std::string& name) {
  auto key = EcKey::Generate(Curve::kP384);
  EXPECT_TRUE(key.ok());
  auto der = IssueCertificate(*key, name, *key, "", /*is_ca=*/true, 30);
  EXPECT_TRUE(der.ok()) << der.status();
  return Ca{std::move(*key), *der};
}

std::string Issue(const Ca& ca, const std::string& cn) {
  auto key = EcKey::Generate(Curve::kP384);
  EXPECT_TRUE(key.ok());
  auto der = IssueCertificate(*key, cn, ca.key, ca.der, /*is_ca=*/false, 10);
  EXPECT_TRUE(der.ok()) << der.status();
  return *der;
}

class CertificateCacheTest : public ::testing::Test {
 protected:
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  std::function<absl::Time()> Clock() {
    return [this] { return now_; };
  }
};

TEST_F(CertificateCacheTest, RemembersAVerifiedCertificateUntilRecheck) {
  Ca ca = MakeCa("device-ca");
  const std::string gpu = Issue(ca, "GPU-0001");
  CertificateCache cache(ca.der, absl::Seconds(60), 16, Clock());
  auto first = cache.Verify(gpu);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)->common_name, "GPU-0001");
  now_ += absl::Seconds(59);
  auto second = cache.Verify(gpu);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->get(), first->get());  // not verified again
  now_ += absl::Seconds(2);
  auto third = cache.Verify(gpu);
  ASSERT_TRUE(third.ok());
  EXPECT_NE(third->get(), first->get());  // the chain was checked again
  EXPECT_EQ((*third)->common_name, "GPU-0001");
  // A clock that went backwards is not trusted either.
  now_ -= absl::Seconds(10);
  auto fourth = cache.Verify(gpu);
  ASSERT_TRUE(fourth.ok());
  EXPECT_NE(fourth->get(), third->get());
}

TEST_F(CertificateCacheTest, ACachedCertificateCoversNoOther) {
  Ca ca = MakeCa("device-ca");
  Ca rogue = MakeCa("device-ca");  // same name, other key
  const std::string good = Issue(ca, "GPU-0001");
  const std::string forged = Issue(rogue, "GPU-0001");
  CertificateCache cache(ca.der, absl::Seconds(60), 16, Clock());
  ASSERT_TRUE(cache.Verify(good).ok());
  auto refused = cache.Verify(forged);
  EXPECT_FALSE(refused.ok());
  // Refusals are not remembered, and do not evict the good entry.
  EXPECT_FALSE(cache.Verify(forged).ok());
  EXPECT_EQ(cache.size(), 1u);
  std::string truncated = good.substr(0, good.size() - 1);
  EXPECT_FALSE(cache.Verify(truncated).ok());
  EXPECT_FALSE(cache.Verify("").ok());
  EXPECT_EQ(cache.size(), 1u);
}

TEST_F(CertificateCacheTest, BoundedByCapacity) {
  Ca ca = MakeCa("ak-ca");
  CertificateCache cache(ca.der, absl::Seconds(60), 2, Clock());
  const std::string a = Issue(ca, "td-a"), b = Issue(ca, "td-b"), c = Issue(ca, "td-c");
  ASSERT_TRUE(cache.Verify(a).ok());
  ASSERT_TRUE(cache.Verify(b).ok());
  auto got = cache.Verify(c);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)->common_name, "td-c");
  EXPECT_LE(cache.size(), 2u);
  auto again = cache.Verify(a);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->common_name, "td-a");
  EXPECT_LE(cache.size(), 2u);
}

}  // namespace
}  // namespace gputravel
