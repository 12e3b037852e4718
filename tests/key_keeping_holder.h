#ifndef GPUTRAVEL_TESTS_KEY_KEEPING_HOLDER_H_
#define GPUTRAVEL_TESTS_KEY_KEEPING_HOLDER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "cli/emulated_stack.h"
#include "grpcpp/grpcpp.h"
#include "keyxfer/attested_channel.h"
#include "keyxfer/attester.h"
#include "keyxfer/cc_channel.h"
#include "proto/holder.grpc.pb.h"

namespace gputravel {

// A malicious holder for tests: it runs the real protocol with the real
// cryptography and mTLS, provisions synthetic text, and KEEPS every key it is
// handed (what P3 must make useless). It serves in the test process.
class KeyKeepingHolder final : public v1::HolderAgent::Service {
 public:
  // One hand-off: its keys, one per lane of its binding, in lane order.
  struct Kept {
    std::vector<ChannelMaterial> keys;
    v1::HandoffBinding binding;
  };

  // Serves as holder `name` (domain "td-<name>") of `stack`, which must have
  // been started with it in extra_holders (see Options()).
  static absl::StatusOr<std::unique_ptr<KeyKeepingHolder>> Serve(EmulatedStack* stack,
                                                                 const std::string& name,
                                                                 const std::string& dir);
  // The StackOptions entries that make the stack include this holder.
  static void AddTo(StackOptions* o, const std::string& name, const std::string& dir);
  ~KeyKeepingHolder() override;

  grpc::Status GetInfo(grpc::ServerContext*, const v1::GetInfoRequest*,
                       v1::HolderInfo* out) override;
  grpc::Status OpenChannel(grpc::ServerContext*, const v1::OpenChannelRequest* req,
                           v1::OpenChannelResponse* out) override;
  grpc::Status Provision(grpc::ServerContext*, const v1::ProvisionRequest* req,
                         grpc::ServerWriter<v1::ProvisionUpdate>* out) override;

  // Every key handed to this holder so far (copies).
  std::vector<Kept> kept();

  // Where the holder also aims, with each of its keys, while they live (the
  // GPU routed to it): one chunk per key and aim, each made with the real
  // key (so it authenticates), each a write its window does not allow.
  enum class Aim {
    // After writing its window: the first counter past the lane's window,
    // over the lane's own first chunk.
    kPastWindow,
    // Before writing: the lane's first counter, at offset 0 of a buffer it
    // was not handed.
    kOtherBuffer,
    // Before writing: the lane's first counter, in its own buffer but
    // outside its lane (another lane's bytes, or past the window).
    kOutsideLane,
  };
  void AimOutside(Aim aim) {
    absl::MutexLock l(&mu_);
    aims_.push_back(aim);
  }
  // What the device answered each aimed chunk, in the order tried.
  std::vector<absl::Status> aimed() {
    absl::MutexLock l(&mu_);
    return aimed_;
  }

  // Called once the holder's window is on the device, before its report is
  // sent (the GPU is still routed to this holder), with the hand-off's
  // binding: what a host, or this holder, could do then.
  void set_after_write(std::function<void(const v1::HandoffBinding&)> f) {
    absl::MutexLock l(&mu_);
    after_write_ = std::move(f);
  }

  // Called once the hand-off is unwrapped, before the holder writes anything
  // (the GPU is routed to this holder): what a host could do just as the
  // holder starts to write.
  void set_before_write(std::function<void(const v1::HandoffBinding&)> f) {
    absl::MutexLock l(&mu_);
    before_write_ = std::move(f);
  }

  // Called with the hand-off's binding, the report and the same report as
  // this holder sealed it, just before it is sent: a test may put something
  // else in `*sealed` (what a party in the middle that holds this holder's
  // TLS key could send).
  using ReportHook = std::function<void(const v1::HandoffBinding&,
                                        const v1::ProvisionReport& report, std::string* sealed)>;
  void set_report(ReportHook f) {
    absl::MutexLock l(&mu_);
    report_ = std::move(f);
  }

  // Tries every kept key (every lane's of every hand-off) against the device
  // (the GPU routed to this holder's TD with the orchestrator's MUX
  // credentials, as a malicious host could): each key on its own engine, at
  // its own session and claiming the device's current session, at several
  // counters. Counts the device's answers.
  struct Attempts {
    int accepted = 0;             // must stay 0
    int old_session_refused = 0;  // FAILED_PRECONDITION: that session is gone
    int tag_refused = 0;          // UNAUTHENTICATED: the key is not the session's
    int other = 0;
  };
  absl::StatusOr<Attempts> TryKeptKeys(EmulatedStack* stack);

 private:
  KeyKeepingHolder() = default;

  std::string name_, domain_, device_endpoint_, dir_;
  std::string shared_dir_;  // its domain's shared memory (bounce rings)
  std::unique_ptr<Attester> attester_;
  std::unique_ptr<Verifier> verifier_;
  std::unique_ptr<grpc::Server> server_;
  absl::Mutex mu_;
  std::unique_ptr<ChannelResponder> responder_ ABSL_GUARDED_BY(mu_);
  std::vector<Kept> kept_ ABSL_GUARDED_BY(mu_);
  std::vector<Aim> aims_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> aimed_ ABSL_GUARDED_BY(mu_);
  // Tries `aim` with every lane key of the hand-off `b` (`data`: the window).
  void TryAim(Aim aim, const v1::HandoffBinding& b, const std::vector<ChannelMaterial>& keys,
              const std::string& data) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::function<void(const v1::HandoffBinding&)> after_write_ ABSL_GUARDED_BY(mu_);
  std::function<void(const v1::HandoffBinding&)> before_write_ ABSL_GUARDED_BY(mu_);
  ReportHook report_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gputravel

#endif  // GPUTRAVEL_TESTS_KEY_KEEPING_HOLDER_H_
