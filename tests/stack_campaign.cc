#include "tests/stack_campaign.h"

#include <chrono>
#include <map>
#include <thread>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/orchestrator.grpc.pb.h"

namespace gputravel {
namespace {

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

}  // namespace

grpc::Status CreateNamedCampaign(v1::Orchestrator::Stub* stub, nlohmann::json spec,
                                 const std::string& name) {
  spec["name"] = name;
  v1::CreateCampaignRequest req;
  req.set_request_id("r-" + name);
  req.set_spec_json(spec.dump());
  v1::CreateCampaignResponse out;
  grpc::ClientContext ctx;
  ctx.set_deadline(In(60));
  return stub->CreateCampaign(&ctx, req, &out);
}

grpc::Status ControlCampaign(v1::Orchestrator::Stub* stub, const std::string& what,
                             const std::string& name, v1::Campaign* out) {
  v1::CampaignRef ref;
  ref.set_name(name);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(30));
  if (what == "start") return stub->StartCampaign(&ctx, ref, out);
  if (what == "pause") return stub->PauseCampaign(&ctx, ref, out);
  if (what == "resume") return stub->ResumeCampaign(&ctx, ref, out);
  return stub->CancelCampaign(&ctx, ref, out);
}

bool ResumeCampaign(EmulatedStack* stack, const std::string& name, double seconds) {
  auto stub = stack->OperatorClient();
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  do {
    v1::Campaign c;
    if (ControlCampaign(stub.get(), "resume", name, &c).ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

absl::Status CreateAndStartCampaign(EmulatedStack* stack, const std::string& request_id) {
  auto stub = stack->OperatorClient();
  v1::CreateCampaignRequest req;
  req.set_request_id(request_id);
  req.set_spec_json(stack->CampaignSpec().dump());
  v1::CreateCampaignResponse created;
  grpc::ClientContext ctx;
  ctx.set_deadline(In(60));
  grpc::Status s = stub->CreateCampaign(&ctx, req, &created);
  if (!s.ok()) return absl::InternalError("CreateCampaign: " + s.error_message());
  v1::CampaignRef ref;
  ref.set_name(created.campaign().name());
  v1::Campaign c;
  grpc::ClientContext ctx2;
  ctx2.set_deadline(In(30));
  s = stub->StartCampaign(&ctx2, ref, &c);
  if (!s.ok()) return absl::InternalError("StartCampaign: " + s.error_message());
  return absl::OkStatus();
}

v1::Campaign GetStackCampaign(EmulatedStack* stack, const std::string& name,
                              bool include_trips) {
  auto stub = stack->OperatorClient();
  v1::GetCampaignRequest req;
  req.set_name(name);
  req.set_include_trips(include_trips);
  v1::Campaign out;
  grpc::ClientContext ctx;
  ctx.set_deadline(In(30));
  grpc::Status s = stub->GetCampaign(&ctx, req, &out);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return out;
}

bool WaitForCampaign(EmulatedStack* stack, const std::string& name, double seconds,
                     const std::function<bool(const v1::Campaign&)>& done, v1::Campaign* last) {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (std::chrono::steady_clock::now() < until) {
    *last = GetStackCampaign(stack, name);
    if (done(*last)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::vector<v1::Event> RecordedEvents(EmulatedStack* stack, const std::string& name,
                                      const std::function<bool(const v1::Event&)>& until,
                                      int64_t after_seq, double seconds) {
  auto stub = stack->OperatorClient();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  v1::WatchCampaignRequest req;
  req.set_name(name);
  req.set_after_seq(after_seq);
  auto reader = stub->WatchCampaign(&ctx, req);
  std::vector<v1::Event> out;
  v1::Event e;
  while (reader->Read(&e)) {
    if (e.seq() == 0) continue;
    out.push_back(e);
    if (until && until(e)) break;
  }
  ctx.TryCancel();
  (void)reader->Finish();
  return out;
}

void ExpectTripsOneAtATime(const std::vector<v1::Event>& events) {
  std::map<uint64_t, int64_t> started, finished;
  for (const auto& e : events) {
    if (e.kind() == v1::TRIP_STARTED) started[e.trip()] = e.seq();
    if (e.kind() == v1::TRIP_FINISHED) finished[e.trip()] = e.seq();
  }
  int64_t prev_finished = 0;
  for (const auto& s : started) {
    EXPECT_GT(s.second, prev_finished) << "trip " << s.first << " started before the previous"
                                       << " trip's buffer was scrubbed";
    ASSERT_TRUE(finished.count(s.first)) << "trip " << s.first << " never finished";
    prev_finished = finished[s.first];
  }
}

}  // namespace gputravel
