#include "util/json_fields.h"

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(JsonFieldsTest, KnownFieldsPassAndAnUnknownOneIsNamedWithTheAcceptedOnes) {
  const std::set<std::string> known = {"uri", "gpus"};
  EXPECT_TRUE(RefuseUnknownFields(nlohmann::json::parse(R"({"uri": "x", "gpus": []})"), known,
                                  "mux.json: libvirt")
                  .ok());
  EXPECT_TRUE(RefuseUnknownFields(nlohmann::json::object(), known, "w").ok());
  EXPECT_TRUE(RefuseUnknownFields(nlohmann::json::array(), known, "w").ok());
  absl::Status s = RefuseUnknownFields(nlohmann::json::parse(R"({"uri": "x", "gpu": []})"),
                                       known, "mux.json: libvirt");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "mux.json: libvirt: unknown field 'gpu' (accepted: gpus, uri)");
}

}  // namespace
}  // namespace gputravel
