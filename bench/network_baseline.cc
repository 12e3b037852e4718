#include "bench/network_baseline.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "auth/identity.h"
#include "auth/pki.h"
#include "bench/device_rig.h"
#include "bench/netns_link.h"
#include "bench/plaintext_source.h"
#include "bench/stats.h"
#include "bench/window_stream.grpc.pb.h"
#include "device/h2d_source.h"
#include "device/h2d_writer.h"
#include "device/window_digest.h"
#include "grpcpp/grpcpp.h"
#include "util/grpc_status.h"
#include "util/subprocess.h"

namespace gputravel {
namespace bench {
namespace {

using json = nlohmann::json;

constexpr char kHolderName[] = "h1";
constexpr int kHolderPort = 7443;
constexpr uint32_t kPieceBytes = 1u << 20;
constexpr uint32_t kChunkBytes = 2u << 20;   // the writer's default chunk
constexpr uint64_t kReadPiece = 8u << 20;    // as a trip reads back

class WindowSourceService final : public v1::WindowSource::Service {
 public:
  explicit WindowSourceService(uint64_t max_bytes) : window_(max_bytes) {}

  grpc::Status Fetch(grpc::ServerContext* ctx, const v1::FetchWindowRequest* req,
                     grpc::ServerWriter<v1::WindowPiece>* writer) override {
    if (req->bytes() > window_.size()) {
      return grpc::Status(grpc::StatusCode::OUT_OF_RANGE,
                          "holder serves windows up to " + std::to_string(window_.size()) +
                              " bytes, asked for " + std::to_string(req->bytes()));
    }
    const uint32_t piece = std::max<uint32_t>(
        1, std::min<uint32_t>(req->piece_bytes() ? req->piece_bytes() : kPieceBytes, kPieceBytes));
    v1::WindowPiece msg;
    for (uint64_t off = 0; off < req->bytes() && !ctx->IsCancelled(); off += piece) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(piece, req->bytes() - off));
      msg.set_offset(off);
      std::string* data = msg.mutable_data();
      data->resize(n);
      absl::Status s = window_.Read(off, reinterpret_cast<uint8_t*>(&(*data)[0]), n);
      if (!s.ok()) return ToGrpc(s);
      if (!writer->Write(msg)) return grpc::Status(grpc::StatusCode::CANCELLED, "peer gone");
    }
    return grpc::Status::OK;
  }

 private:
  PlaintextSource window_;
};

TlsFiles FilesFor(const std::string& dir, const Identity& id) {
  TlsFiles f;
  f.ca = CaCertPath(dir);
  f.cert = IdentityCertPath(dir, id);
  f.key = IdentityKeyPath(dir, id);
  return f;
}

std::string JoinSizes(const std::vector<uint64_t>& sizes) {
  std::string s;
  for (uint64_t v : sizes) s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

}  // namespace

std::string RateLabel(uint64_t rate) {
  if (rate == 0) return "unshaped";
  std::ostringstream o;
  if (rate >= 1000000000ull && rate % 1000000000ull == 0) {
    o << rate / 1000000000ull << " Gbit/s";
  } else {
    o << static_cast<double>(rate) / 1e6 << " Mbit/s";
  }
  return o.str();
}

absl::Status ServeHolderWindow(const std::string& listen, const TlsFiles& tls,
                               uint64_t max_bytes, const std::string& ready_file) {
  // Ends with the driver, even if it is killed without cleaning up.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  auto creds = MakeServerCredentials(tls);
  if (!creds.ok()) return creds.status();
  WindowSourceService service(max_bytes);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, *creds);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    return absl::UnavailableError("holder side: cannot listen on " + listen);
  }
  {
    std::ofstream ready(ready_file);
    ready << listen << "\n";
    if (!ready) return absl::UnavailableError("holder side: cannot write " + ready_file);
  }
  server->Wait();
  return absl::OkStatus();
}

json ToJson(const BaselineRun& r) {
  return {{"bytes", r.bytes},
          {"handshake_seconds", r.handshake_seconds},
          {"network_seconds", r.network_seconds},
          {"load_seconds", r.load_seconds},
          {"verify_seconds", r.verify_seconds},
          {"total_seconds", r.total_seconds},
          {"verified", r.verified}};
}

absl::StatusOr<std::vector<BaselineRun>> FetchAndLoad(const std::string& holder_endpoint,
                                                      const TlsFiles& tls,
                                                      const std::string& holder_name,
                                                      const std::vector<uint64_t>& sizes,
                                                      double deadline_seconds) {
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (sizes.empty()) return std::vector<BaselineRun>{};
  const uint64_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  // The GPU is a PCIe device of the orchestrator's machine, not on the
  // network: an emulated GPU in this process, its orchestrator domain with
  // shared memory for the bounce rings of its own writes.
  auto rig = DeviceRig::Start(max_bytes + (64u << 20), "/dev/shm", "/dev/shm");
  if (!rig.ok()) return rig.status();

  auto t0 = std::chrono::steady_clock::now();
  auto channel = MakeSecureChannel(holder_endpoint, tls, Identity{kRoleHolder, holder_name});
  if (!channel.ok()) return channel.status();
  if (!(*channel)->WaitForConnected(std::chrono::system_clock::now() +
                                    std::chrono::seconds(30))) {
    return absl::UnavailableError("orchestrator side: no TLS connection to the holder at " +
                                  holder_endpoint + " within 30 s");
  }
  const double handshake = SecondsSince(t0);
  auto stub = v1::WindowSource::NewStub(*channel);

  std::vector<BaselineRun> runs;
  for (uint64_t bytes : sizes) {
    BaselineRun r;
    r.bytes = bytes;
    r.handshake_seconds = handshake;
    std::string received(bytes, '\0');
    const auto start = std::chrono::steady_clock::now();
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(deadline_seconds * 1000)));
      v1::FetchWindowRequest req;
      req.set_bytes(bytes);
      req.set_piece_bytes(kPieceBytes);
      auto reader = stub->Fetch(&ctx, req);
      v1::WindowPiece piece;
      uint64_t next = 0;
      while (reader->Read(&piece)) {
        if (piece.offset() != next || piece.data().size() > bytes - next) {
          ctx.TryCancel();
          return absl::DataLossError("holder sent a piece at " + std::to_string(piece.offset()) +
                                     ", expected " + std::to_string(next));
        }
        std::memcpy(&received[next], piece.data().data(), piece.data().size());
        next += piece.data().size();
      }
      absl::Status s = FromGrpc(reader->Finish(), "holder WindowSource.Fetch");
      if (!s.ok()) return s;
      if (next != bytes) {
        return absl::DataLossError("holder sent " + std::to_string(next) + " of " +
                                   std::to_string(bytes) + " bytes");
      }
    }
    r.network_seconds = SecondsSince(start);

    // The orchestrator's own CC channel: a fresh session, a buffer, the copy
    // engine's H2D key, the real writer.
    auto t1 = std::chrono::steady_clock::now();
    auto key = (*rig)->KeyForOrchestrator();
    if (!key.ok()) return key.status();
    auto buffer = (*rig)->session().AllocBuffer(bytes);
    if (!buffer.ok()) return buffer.status();
    H2dWriterOptions wo;
    wo.chunk_size = kChunkBytes;
    wo.bounce_dir = "/dev/shm";
    H2dWriter writer((*rig)->orch_channel(), wo);
    CounterWindow window{key->next_counter, H2dWriter::ChunksFor(bytes, kChunkBytes)};
    const std::string& src = received;
    ChunkSource source = [&src](uint64_t off, uint8_t* dst, size_t n) {
      std::memcpy(dst, src.data() + off, n);
      return absl::OkStatus();
    };
    auto stats = writer.Write(key->key, key->session_id, *buffer, 0, bytes, window, source);
    if (!stats.ok()) return stats.status();
    r.load_seconds = SecondsSince(t1);

    auto t2 = std::chrono::steady_clock::now();
    std::string back;
    back.reserve(bytes);
    for (uint64_t off = 0; off < bytes; off += kReadPiece) {
      auto piece = (*rig)->session().Read(*buffer, off, std::min(kReadPiece, bytes - off));
      if (!piece.ok()) return piece.status();
      back += *piece;
    }
    auto digest = WindowDigest(key->key, key->session_id, *buffer, 0, back, kChunkBytes,
                               window.first);
    if (!digest.ok()) return digest.status();
    r.verified = *digest == stats->digest && back == received;
    r.verify_seconds = SecondsSince(t2);
    r.total_seconds = SecondsSince(start);
    absl::Status freed = (*rig)->session().FreeBuffer(*buffer);
    if (!freed.ok()) return freed;
    runs.push_back(r);
  }
  return runs;
}

json ToJson(const CapResult& r) {
  json measured = json::array();
  for (const auto& m : r.measured) measured.push_back(ToJson(m));
  json sizes = json::array();
  for (size_t i = 0; i < r.sizes.size(); ++i) {
    sizes.push_back({{"bytes", r.sizes[i]},
                     {"total_seconds", r.total_seconds[i]},
                     {"extrapolated", static_cast<bool>(r.extrapolated[i])}});
  }
  return {{"label", r.label},
          {"rate_bits_per_second", r.rate_bits_per_second},
          {"delay_ms", r.delay_ms},
          {"measured", measured},
          {"floor_seconds", r.floor_seconds},
          {"above_floor", r.above_floor},
          {"qdisc_bytes", r.qdisc_bytes},
          {"linearity", r.linearity},
          {"linear", r.linear},
          {"sizes", sizes}};
}

absl::StatusOr<std::vector<CapResult>> RunBaselineSweep(const SweepOptions& o) {
  if (o.sizes.size() < 2) return absl::InvalidArgumentError("the sweep needs two sizes at least");
  const std::string pki = o.work_dir + "/pki";
  absl::Status s = InitCampaignCa(pki, "netbench", 2);
  if (!s.ok()) return s;
  const Identity holder{kRoleHolder, kHolderName};
  const Identity orch{kRoleOrchestrator, "orchestrator"};
  for (const Identity& id : {holder, orch}) {
    auto issued = IssueIdentity(pki, id, 1);
    if (!issued.ok()) return issued.status();
  }
  auto link = NetnsLink::Create();
  if (!link.ok()) return link.status();

  const uint64_t max_bytes = o.sizes.back();
  const std::string listen = std::string(NetnsLink::kHolderAddress) + ":" +
                             std::to_string(kHolderPort);
  const std::string ready = o.work_dir + "/holder.ready";
  const TlsFiles hf = FilesFor(pki, holder);
  Subprocess holder_proc;  // terminated by its destructor, before the link goes
  s = holder_proc.Start({IpBinary(), "netns", "exec", (*link)->holder_ns(), o.self_binary,
                         "--role=holder", "--listen=" + listen, "--tls_ca=" + hf.ca,
                         "--tls_cert=" + hf.cert, "--tls_key=" + hf.key,
                         "--max_bytes=" + std::to_string(max_bytes), "--ready=" + ready},
                        o.work_dir + "/holder.log");
  if (!s.ok()) return s;
  s = WaitForFile(ready, &holder_proc, "the baseline's holder side", 120000);
  if (!s.ok()) return absl::UnavailableError(std::string(s.message()) + ": " +
                                             LogTail(o.work_dir + "/holder.log"));

  const TlsFiles of = FilesFor(pki, orch);
  std::vector<CapResult> results;
  for (uint64_t rate : o.rates_bits_per_second) {
    CapResult c;
    c.label = RateLabel(rate);
    c.rate_bits_per_second = rate;
    c.delay_ms = o.delay_ms;
    s = (*link)->Shape(rate, o.delay_ms);
    if (!s.ok()) return s;
    std::vector<uint64_t> measure;
    double physical_sum = 0;
    for (size_t i = 0; i < o.sizes.size(); ++i) {
      const double physical = rate ? o.sizes[i] * 8.0 / rate : 0;
      if (i < 2 || physical <= o.max_measure_seconds) {
        measure.push_back(o.sizes[i]);
        physical_sum += physical;
      }
    }
    auto before = (*link)->ShapedBytesSent();
    if (!before.ok()) return before.status();
    std::string out;
    const double deadline = 60 + 3 * physical_sum;
    s = RunCommand({"timeout", std::to_string(static_cast<int>(deadline * 2 + 120)), "ip",
                    "netns", "exec", (*link)->orchestrator_ns(), o.self_binary,
                    "--role=orchestrator",
                    "--holder=" + listen, "--tls_ca=" + of.ca, "--tls_cert=" + of.cert,
                    "--tls_key=" + of.key, "--sizes=" + JoinSizes(measure),
                    "--deadline=" + std::to_string(static_cast<int>(deadline))},
                   &out);
    if (!s.ok()) return absl::InternalError("baseline at " + c.label + ": " + std::string(s.message()));
    auto after = (*link)->ShapedBytesSent();
    if (!after.ok()) return after.status();
    c.qdisc_bytes = *after - *before;
    json j = json::parse(out, nullptr, false);
    if (j.is_discarded() || !j.is_array() || j.size() != measure.size()) {
      return absl::InternalError("baseline at " + c.label + ": unexpected output: " + out);
    }
    for (const auto& m : j) {
      BaselineRun r;
      r.bytes = m.at("bytes").get<uint64_t>();
      r.handshake_seconds = m.at("handshake_seconds").get<double>();
      r.network_seconds = m.at("network_seconds").get<double>();
      r.load_seconds = m.at("load_seconds").get<double>();
      r.verify_seconds = m.at("verify_seconds").get<double>();
      r.total_seconds = m.at("total_seconds").get<double>();
      r.verified = m.at("verified").get<bool>();
      if (!r.verified) {
        return absl::DataLossError("baseline at " + c.label + ": the window read back from "
                                   "the GPU does not match what the holder sent");
      }
      const double floor = rate ? r.bytes * 8.0 / rate : 0;
      c.floor_seconds.push_back(floor);
      if (r.network_seconds < floor) c.above_floor = false;
      c.measured.push_back(r);
    }
    const BaselineRun& a = c.measured[c.measured.size() - 2];
    const BaselineRun& b = c.measured.back();
    c.linearity = (b.total_seconds / a.total_seconds) /
                  (static_cast<double>(b.bytes) / static_cast<double>(a.bytes));
    c.linear = std::abs(c.linearity - 1) <= kLinearTolerance;
    const double slope = (b.total_seconds - a.total_seconds) /
                         (static_cast<double>(b.bytes) - static_cast<double>(a.bytes));
    for (uint64_t size : o.sizes) {
      c.sizes.push_back(size);
      auto it = std::find_if(c.measured.begin(), c.measured.end(),
                             [size](const BaselineRun& m) { return m.bytes == size; });
      if (it != c.measured.end()) {
        c.total_seconds.push_back(it->total_seconds);
        c.extrapolated.push_back(false);
      } else {
        // Not measured: only from a line the two largest sizes showed.
        c.total_seconds.push_back(
            c.linear ? b.total_seconds + slope * (static_cast<double>(size) - b.bytes) : -1);
        c.extrapolated.push_back(true);
      }
    }
    std::fprintf(stderr, "network baseline: %s done (%zu sizes measured)\n", c.label.c_str(),
                 c.measured.size());
    results.push_back(std::move(c));
  }
  holder_proc.Terminate(2000);
  return results;
}

}  // namespace bench
}  // namespace gputravel
