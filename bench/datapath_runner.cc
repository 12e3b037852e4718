#include "bench/datapath_runner.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>

#include "bench/device_rig.h"
#include "cli/emulated_stack.h"
#include "bench/plaintext_source.h"
#include "bench/provision_bench.h"
#include "bench/slot_freeing_device.h"
#include "bench/stage_bench.h"
#include "bench/stats.h"
#include "device/bounce_pool.h"
#include "device/h2d_writer.h"
#include "holder_agent/dataset.h"
#include "holder_agent/dataset_source.h"
#include "keyxfer/random.h"
#include "util/files.h"
#include "util/hex.h"

namespace gputravel {
namespace bench {
namespace {

void Say(const std::function<void(const std::string&)>& progress, const std::string& line) {
  if (progress) progress(line);
}

// The first `n` bytes `source` serves, written to `fd` (`what` names it).
absl::Status WriteSourceTo(int fd, PlaintextSource& source, uint64_t n, const std::string& what) {
  std::vector<uint8_t> block(1u << 20);
  for (uint64_t off = 0; off < n; off += block.size()) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(block.size(), n - off));
    absl::Status s = source.Read(off, block.data(), len);
    if (!s.ok()) return s;
    const ssize_t w = ::pwrite(fd, block.data(), len, static_cast<off_t>(off));
    if (w != static_cast<ssize_t>(len)) {
      return absl::ResourceExhaustedError(
          "cannot write " + what + ": " +
          (w < 0 ? std::string(std::strerror(errno)) : "short write (is the file system full?)"));
    }
  }
  return absl::OkStatus();
}

// Index of the median of `v` (lower median for even sizes).
size_t MedianIndex(const std::vector<double>& v) {
  std::vector<size_t> idx(v.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  return idx[(idx.size() - 1) / 2];
}

// The machine is shared: what OpenSSL gets from one CPU can change between
// the start of a run and a given pass. A short reference measured right
// before each pass gives every pass its own yardstick (FinishFigure pairs
// them).
absl::Status AdjacentReference(const BenchConfig& config, ThroughputFigure* f) {
  if (config.adjacent_reference_seconds <= 0) return absl::OkStatus();
  auto r = MeasureGcmReference(f->chunk_size, config.adjacent_reference_seconds);
  if (!r.ok()) return r.status();
  f->pass_adjacent_reference_mbps.push_back(r->mbps);
  return absl::OkStatus();
}

// For (a) with several threads: what OpenSSL gets on that many threads at
// once, right before the pass (diagnostic; the target stays threads x the
// single-thread figure). For (b'), on every CPU at once (`threads`).
absl::Status ConcurrentReference(const BenchConfig& config, ThroughputFigure* f,
                                 int threads = 0) {
  if (threads == 0) threads = f->threads;
  if (config.adjacent_reference_seconds <= 0 || threads < 2) return absl::OkStatus();
  auto r = MeasureGcmReferenceConcurrent(f->chunk_size, config.adjacent_reference_seconds,
                                         threads);
  if (!r.ok()) return r.status();
  f->pass_concurrent_reference_mbps.push_back(r->mbps);
  return absl::OkStatus();
}

// For (b'): both sides of the window with OpenSSL alone on `pairs` pairs of
// threads, right before the pass, in rings as deep as the writer's.
absl::Status BothSidesReference(const BenchConfig& config, const H2dWriterOptions& options,
                                ThroughputFigure* f, int pairs) {
  if (config.adjacent_reference_seconds <= 0) return absl::OkStatus();
  auto r = MeasureGcmBothSides(f->chunk_size, f->window_bytes, options.slots, pairs,
                               config.bounce_dir);
  if (!r.ok()) return r.status();
  f->pass_both_sides_mbps.push_back(r->mbps);
  return absl::OkStatus();
}

// Creates the ring the passes of `f` share, as the holder agent creates its
// ring on its first trip and keeps it (device/bounce_pool.h), and records
// what that cost.
absl::Status MakeRing(BouncePool& pool, uint64_t window, const H2dWriterOptions& options,
                      ThroughputFigure* f) {
  const H2dWriter::Plan plan = H2dWriter::PlanFor(window, options);
  auto t0 = std::chrono::steady_clock::now();
  auto lease = pool.Acquire(plan.slots, plan.slot_size);
  if (!lease.ok()) return lease.status();
  f->ring_create_seconds = SecondsSince(t0);
  return absl::OkStatus();
}

}  // namespace

BenchConfig BenchConfig::Full() { return BenchConfig(); }

BenchConfig BenchConfig::Quick() {
  BenchConfig c;
  c.reference_seconds = 0.1;
  c.adjacent_reference_seconds = 0.02;
  c.stage_window = 32ull << 20;
  c.stage_passes = 3;
  c.device_window = 16ull << 20;
  c.device_passes = 2;
  c.provision_window = 64ull << 20;
  c.provision_passes = 2;
  c.source_bytes = 64u << 20;  // still larger than a server's L3
  c.component_iterations = 10;
  c.trips.rounds = 20;
  c.trips.route_samples = 10;
  return c;
}

namespace {

// (b) and (b'): `config.provision_passes` passes of `measure` (a writer with
// the provisioning defaults and a kept ring; `make_ring`: made before the
// passes, as a holder agent's ring is), each after its adjacent reference,
// into `*f`, whose timings are the median pass's.
// `concurrent_threads` > 1: OpenSSL on that many threads at once is also
// measured before each pass (ConcurrentReference), and both sides of the
// window on half as many pairs of threads (BothSidesReference).
absl::Status ProvisionFigure(
    const BenchConfig& config, const BenchReport& report, bool make_ring, ThroughputFigure* f,
    const std::function<absl::StatusOr<ProvisionResult>(const H2dWriterOptions&)>& measure,
    int concurrent_threads = 0) {
  f->chunk_size = config.provision_chunk;
  f->threads = config.provision_threads;
  f->window_bytes = config.provision_window;
  H2dWriterOptions wo;
  wo.chunk_size = config.provision_chunk;
  wo.threads = config.provision_threads;
  wo.bounce_dir = config.bounce_dir;
  BouncePool pool(config.bounce_dir);
  wo.pool = &pool;
  if (make_ring) {
    absl::Status ring = MakeRing(pool, config.provision_window, wo, f);
    if (!ring.ok()) return ring;
  }
  std::vector<ProvisionResult> passes;
  for (int p = 0; p < config.provision_passes; ++p) {
    absl::Status adj = AdjacentReference(config, f);
    if (!adj.ok()) return adj;
    if (concurrent_threads > 0) {
      adj = ConcurrentReference(config, f, concurrent_threads);
      if (!adj.ok()) return adj;
      adj = BothSidesReference(config, wo, f, std::max(1, concurrent_threads / 2));
      if (!adj.ok()) return adj;
    }
    auto r = measure(wo);
    if (!r.ok()) return r.status();
    f->pass_mbps.push_back(r->mbps);
    passes.push_back(*r);
  }
  FinishFigure(report, f);
  const ProvisionResult& m = passes[MedianIndex(f->pass_mbps)];
  f->seconds = m.seconds;
  f->cpu_seconds = m.cpu_seconds;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BenchReport> RunDatapathBench(
    const BenchConfig& config, const std::function<void(const std::string&)>& progress) {
  auto start = std::chrono::steady_clock::now();
  BenchReport report;
  report.ran_datapath = config.run_datapath;
  report.ran_trips = config.run_trips;
  if (config.run_trips) {
    // Before a minute of data-path figures, not after.
    auto daemons = FindDaemonDir(config.trips.bin_dir);
    if (!daemons.ok()) return daemons.status();
  }
  report.machine = CollectMachineInfo();
  report.bounce_dir = config.bounce_dir;
  report.large_source_bytes = config.source_bytes;

  // (ref) OpenSSL at 16 KiB and at every chunk size in play.
  std::set<size_t> sizes = {16u << 10, config.provision_chunk};
  for (uint32_t cs : config.chunk_sizes) sizes.insert(cs);
  Say(progress, "(ref) OpenSSL AES-256-GCM single thread");
  for (size_t n : sizes) {
    auto r = MeasureGcmReference(n, config.reference_seconds);
    if (!r.ok()) return r.status();
    report.reference.push_back(*r);
  }
  for (size_t n : sizes) {
    if (n == (16u << 10) || !config.run_datapath) continue;  // (a) and (b) only
    auto r = MeasureGcmIntoBounceRing(n, 4, config.bounce_dir, config.reference_seconds);
    if (!r.ok()) return r.status();
    report.reference.push_back(*r);
    r = MeasureGcmFromLargeSource(n, config.source_bytes, 4, config.bounce_dir,
                                  config.reference_seconds);
    if (!r.ok()) return r.status();
    report.reference.push_back(*r);
  }

  // Lends views of any chunk in play (the writer's zero-copy path).
  uint32_t max_chunk = config.provision_chunk;
  for (uint32_t cs : config.chunk_sizes) max_chunk = std::max(max_chunk, cs);
  // (Without the data path, only the 4 KiB steps of (c) need it.)
  PlaintextSource source(config.run_datapath ? config.source_bytes : max_chunk, max_chunk);
  ChannelMaterial key;
  key.key = SecretBytes::FromString(RandomString(32));
  RandomBytes(key.iv_mask.data(), key.iv_mask.size());

  // The in-process device of (a'), (b) and the steps of (c).
  const uint64_t device_buffer_bytes =
      config.run_datapath ? std::max(config.provision_window, config.device_window) : 0;
  auto rig = DeviceRig::Start(device_buffer_bytes + (1u << 20), config.bounce_dir);
  if (!rig.ok()) return rig.status();

  if (config.run_datapath && config.run_stages) {
    // (a) encrypt-and-stage: the real writer against a stand-in that frees
    // each slot on its doorbell, from `src`.
    auto stand_in = SlotFreeingDevice::Start();
    if (stand_in == nullptr) return absl::InternalError("cannot start the device stand-in");
    auto stage_cell = [&](H2dSource& src, uint32_t cs, int threads,
                          ThroughputFigure* f) -> absl::Status {
      f->chunk_size = cs;
      f->threads = threads;
      f->window_bytes = config.stage_window;
      H2dWriterOptions wo;
      wo.chunk_size = cs;
      wo.threads = threads;
      wo.bounce_dir = config.bounce_dir;
      BouncePool pool(config.bounce_dir);
      wo.pool = &pool;
      absl::Status st = MakeRing(pool, config.stage_window, wo, f);
      if (!st.ok()) return st;
      std::vector<StageResult> passes;
      uint32_t counter = kFirstMessageCounter;
      for (int p = 0; p < config.stage_passes; ++p) {
        absl::Status adj = AdjacentReference(config, f);
        if (!adj.ok()) return adj;
        adj = ConcurrentReference(config, f);
        if (!adj.ok()) return adj;
        auto r = RunEncryptAndStage(*stand_in, key, 1, 1, config.stage_window, counter, src, wo);
        if (!r.ok()) return r.status();
        counter += static_cast<uint32_t>(r->chunks);
        f->pass_mbps.push_back(r->mbps);
        passes.push_back(*r);
      }
      FinishFigure(report, f);
      const StageResult& m = passes[MedianIndex(f->pass_mbps)];
      f->seconds = m.seconds;
      f->cpu_seconds = m.cpu_seconds;
      f->read_seconds = m.read_seconds;
      f->zero_copy = m.zero_copy;
      return absl::OkStatus();
    };
    Say(progress, "(a) encrypt-and-stage into the bounce ring, a stand-in for the device");
    for (int threads : config.threads) {
      for (uint32_t cs : config.chunk_sizes) {
        ThroughputFigure f;
        absl::Status st = stage_cell(source, cs, threads, &f);
        if (!st.ok()) return st;
        report.stage.push_back(f);
      }
    }
    // The same from a dataset file through the holder agent's own source
    // (each chunk mapped from the file and unmapped after it), the file in
    // the bounce ring's tmpfs so that no disk is involved. Diagnostic rows.
    // Best effort: a bounce_dir without room for the file skips them.
    if (config.dataset_file_rows) {
      Say(progress, "(a) again from a dataset file through the agent's DatasetSource");
      auto rows = [&]() -> absl::Status {
        struct statvfs vfs;
        if (::statvfs(config.bounce_dir.c_str(), &vfs) != 0) {
          return absl::UnavailableError("cannot stat " + config.bounce_dir);
        }
        const uint64_t room = uint64_t{vfs.f_bavail} * vfs.f_frsize;
        if (room < config.stage_window + (64u << 20)) {
          return absl::ResourceExhaustedError(
              "only " + std::to_string(room >> 20) + " MiB free in " + config.bounce_dir +
              " for a " + std::to_string(config.stage_window >> 20) + " MiB dataset file");
        }
        struct statfs fs;
        report.stage_from_file_fs =
            ::statfs(config.bounce_dir.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC
                ? "tmpfs"
                : "not a tmpfs (its storage may count)";
        // Removed at once: an interrupted run leaves nothing behind.
        const std::string path =
            config.bounce_dir + "/gputravel-bench-dataset-" + HexEncode(RandomString(6));
        const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
          return absl::UnavailableError("cannot create " + path + ": " + std::strerror(errno));
        }
        ::unlink(path.c_str());
        absl::Status st = WriteSourceTo(fd, source, config.stage_window, path);
        if (!st.ok()) {
          ::close(fd);
          return st;
        }
        auto dataset = Dataset::Open("/proc/self/fd/" + std::to_string(fd), "raw");
        ::close(fd);  // the dataset holds its own descriptor
        if (!dataset.ok()) return dataset.status();
        report.stage_from_file_mapped = (*dataset)->mappable();
        DatasetSource file_source(**dataset, 0, config.stage_window);
        const std::set<uint32_t> sizes = {config.chunk_sizes.front(), config.chunk_sizes.back()};
        for (uint32_t cs : sizes) {
          for (int threads : config.threads) {
            ThroughputFigure f;
            st = stage_cell(file_source, cs, threads, &f);
            if (!st.ok()) return st;
            report.stage_from_file.push_back(f);
          }
        }
        return absl::OkStatus();
      };
      absl::Status st = rows();
      if (!st.ok()) {
        report.stage_from_file.clear();
        report.stage_from_file_note = std::string(st.message());
      }
    }

    // (a') and (b): the real writer into the in-process device.
    // Each configuration starts from a reset device (fresh memory and rings).
    auto fresh_buffer = [&]() { return (*rig)->ResetAndAlloc(device_buffer_bytes); };
    auto big = fresh_buffer();
    if (!big.ok()) return big.status();
    Say(progress, "(a') encrypt-and-stage through H2dWriter into the in-process device");
    for (int threads : config.threads) {
      for (uint32_t cs : config.chunk_sizes) {
        ThroughputFigure f;
        f.chunk_size = cs;
        f.threads = threads;
        f.window_bytes = config.device_window;
        H2dWriterOptions wo;
        wo.chunk_size = cs;
        wo.threads = threads;
        wo.bounce_dir = config.bounce_dir;
        BouncePool pool(config.bounce_dir);
        wo.pool = &pool;
        absl::Status ring = MakeRing(pool, config.device_window, wo, &f);
        if (!ring.ok()) return ring;
        std::vector<ProvisionResult> passes;
        for (int p = 0; p < config.device_passes; ++p) {
          absl::Status adj = AdjacentReference(config, &f);
          if (!adj.ok()) return adj;
          auto r = MeasureProvision(**rig, *big, config.device_window, source, wo);
          if (!r.ok()) return r.status();
          f.pass_mbps.push_back(r->mbps);
          passes.push_back(*r);
        }
        FinishFigure(report, &f);
        const ProvisionResult& m = passes[MedianIndex(f.pass_mbps)];
        f.seconds = m.seconds;
        f.cpu_seconds = m.cpu_seconds;
        report.stage_device.push_back(f);
        big = fresh_buffer();
        if (!big.ok()) return big.status();
      }
    }
    for (uint32_t cs : config.chunk_sizes) {
      auto c = MeasureDeviceCeiling(**rig, *big, config.device_window, cs, source.AsChunkSource(),
                                    config.bounce_dir);
      if (!c.ok()) return c.status();
      report.device_ceiling.push_back(*c);
    }
    big = fresh_buffer();
    if (!big.ok()) return big.status();
    Say(progress, "(b) end-to-end provisioning of the window");
    absl::Status b = ProvisionFigure(
        config, report, /*make_ring=*/true, &report.provision,
        [&](const H2dWriterOptions& wo) {
          return MeasureProvision(**rig, *big, config.provision_window, source, wo);
        });
    if (!b.ok()) return b;
  }

  if (config.run_datapath && !config.copy_engines.empty()) {
    Say(progress, "(b') end-to-end provisioning through k copy engines");
    for (uint32_t k : config.copy_engines) {
      auto buf = (*rig)->ResetAndAlloc(config.provision_window);
      if (!buf.ok()) return buf.status();
      BenchReport::EngineFigure e;
      e.copy_engines = k;
      ThroughputFigure& f = e.figure;
      const int cpus = std::max(1, report.machine.nproc);
      absl::Status st = ProvisionFigure(
          config, report, /*make_ring=*/false, &f,
          [&](const H2dWriterOptions& wo) {
            return MeasureProvisionLanes(**rig, *buf, config.provision_window, source, wo, k);
          },
          cpus);
      if (!st.ok()) return st;
      // The machine's limit: both sides' AES-GCM (the holder's encryption
      // and the device's decryption) share its cores.
      const double single = f.adjacent_reference_mbps > 0 ? f.adjacent_reference_mbps
                                                          : f.reference_mbps;
      e.limit_mbps = cpus * single / 2;
      e.ratio_limit = e.limit_mbps > 0 ? f.mbps / e.limit_mbps : 0;
      // The same limit measured: OpenSSL on every CPU at once gets less than
      // nproc x one thread (shared cores, clocks, memory).
      e.measured_limit_mbps = f.concurrent_reference_mbps / 2;
      e.ratio_measured_limit = e.measured_limit_mbps > 0 ? f.mbps / e.measured_limit_mbps : 0;
      // OpenSSL alone doing both sides, per pass, against that pass's limit.
      double unused_median_reference = 0;
      PairWithPasses(f.pass_adjacent_reference_mbps, f.pass_both_sides_mbps, cpus / 2.0,
                     &unused_median_reference, &e.both_sides_ratio_limit);
      report.provision_engines.push_back(std::move(e));
    }
  }

  // (c) the steps of a trip in process, then the real stack.
  Say(progress, "(c) control-plane steps in process");
  auto small = (*rig)->ResetAndAlloc(4096);
  if (!small.ok()) return small.status();
  auto comps = MeasureControlPlaneComponents(**rig, *small, config.state_dir,
                                             config.component_iterations);
  if (!comps.ok()) return comps.status();
  report.components = std::move(*comps);
  rig->reset();

  if (config.run_trips) {
    Say(progress, "(c) trips over the multi-process emulated stack");
    report.trips.transport = config.trips.tcp_loopback ? "tcp-loopback" : "unix";
    auto trips = MeasureTrips(config.trips);
    if (trips.ok()) {
      report.trips = *trips;
    } else {
      report.trips_error = std::string(trips.status().message());
    }
  }
  report.load_average_end = LoadAverage();
  report.total_seconds = SecondsSince(start);
  return report;
}

}  // namespace bench
}  // namespace gputravel
