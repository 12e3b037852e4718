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
  absl::Status s = RefuseUnknownFields(nlohmann::json::parse(R"({"uri": "x", "colour": []})"),
                                       known, "mux.json: libvirt");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "mux.json: libvirt: unknown field 'colour' (accepted: gpus, uri)");
}

TEST(JsonFieldsTest, ANearMissGetsTheClosestAcceptedField) {
  const std::set<std::string> known = {"buffer_bytes", "chunk_bytes", "uri", "gpus"};
  absl::Status s =
      RefuseUnknownFields(nlohmann::json::parse(R"({"bufer_bytes": 1})"), known, "c.json");
  EXPECT_EQ(s.message(),
            "c.json: unknown field 'bufer_bytes' (did you mean 'buffer_bytes'? accepted: "
            "buffer_bytes, chunk_bytes, gpus, uri)");
  s = RefuseUnknownFields(nlohmann::json::parse(R"({"gpu": 1})"), known, "mux.json: libvirt");
  EXPECT_EQ(s.message(),
            "mux.json: libvirt: unknown field 'gpu' (did you mean 'gpus'? accepted: "
            "buffer_bytes, chunk_bytes, gpus, uri)");
}

TEST(JsonFieldsTest, NoWhereGivesNoPrefix) {
  absl::Status s = RefuseUnknownFields(nlohmann::json::parse(R"({"x": 1})"), {"uri"}, "");
  EXPECT_EQ(s.message(), "unknown field 'x' (accepted: uri)");
}

}  // namespace
}  // namespace gputravel
