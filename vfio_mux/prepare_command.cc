#include "vfio_mux/prepare_command.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "util/files.h"
#include "util/flags.h"
#include "vfio_mux/sysfs/iommu_cmdline.h"
#include "vfio_mux/sysfs/pci_address.h"
#include "vfio_mux/sysfs/pci_sysfs.h"
#include "vfio_mux/sysfs/sysfs_fs.h"
#include "vfio_mux/sysfs/vfio_preparation.h"

extern char** environ;

namespace gputravel {
namespace {

constexpr char kProgram[] = "vfio_mux prepare";

constexpr char kSummary[] =
    "Prepares the host for one NVIDIA GPU with the sysfs code the MUX itself\n"
    "runs (vfio_mux/sysfs/vfio_preparation.h, also behind the sysfs backend's\n"
    "Prepare and prepare_on_start):\n"
    "  1. checks that the Intel IOMMU is on (intel_iommu=on on the kernel\n"
    "     command line, or on by the kernel's default: a dmar unit under\n"
    "     SYSFS_ROOT/class/iommu) and warns without iommu=pt;\n"
    "  2. makes sure vfio-pci is loaded (runs 'modprobe vfio-pci' only for\n"
    "     --sysfs_root=/sys);\n"
    "  3. checks that the device is an NVIDIA GPU (vendor 0x10de, class\n"
    "     0x03xxxx) and that its IOMMU group will be viable once it is on\n"
    "     vfio-pci, before writing anything;\n"
    "  4. binds it to vfio-pci (driver_override, unbind, drivers_probe), each\n"
    "     write verified by reading sysfs back;\n"
    "  5. disables its reset (empties reset_method), so a release keeps its\n"
    "     CC state, and prints the list it had;\n"
    "  6. prints the NVIDIA gpu-admin-tools step that turns CC mode on.\n"
    "Idempotent. deploy/host/prepare_host.sh runs this command.\n"
    "Exit status: 0 prepared (or would be, with --dry_run), 1 a check or step\n"
    "failed (the message says what to do), 2 bad usage.\n"
    "Example: vfio_mux prepare --bdf=0000:98:00.0 --dry_run";

void Info(const std::string& line) {
  std::printf("%s: %s\n", kProgram, line.c_str());
  std::fflush(stdout);
}

void Warn(const std::string& line) {
  std::fprintf(stderr, "%s: warning: %s\n", kProgram, line.c_str());
}

int Fail(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s: error: %s\n", kProgram, message.c_str());
  return 1;
}

int Usage(const std::string& message) {
  std::fprintf(stderr, "%s: %s\nTry '%s --help'.\n", kProgram, message.c_str(),
               kProgram);
  return 2;
}

// Runs modprobe (from PATH) and returns its outcome.
absl::Status Modprobe(const std::string& module) {
  std::vector<std::string> args = {"modprobe", module};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, "modprobe", nullptr, nullptr, argv.data(), environ);
  if (rc != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot run modprobe: ", ErrnoText(rc), "; install kmod"));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return absl::InternalError(absl::StrCat("waiting for modprobe: ", ErrnoText(errno)));
    }
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "modprobe ", module, " failed (status ", status,
        "): install the kernel's vfio modules (linux-image-*) and check dmesg"));
  }
  return absl::OkStatus();
}

bool HasDmarUnit(SysfsFs& fs, const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> units = fs.ListDir(dir);
  if (!units.ok()) return false;
  for (const std::string& u : *units) {
    if (absl::StartsWith(u, "dmar")) return true;
  }
  return false;
}

}  // namespace

int RunPrepareCommand(int argc, char** argv) {
  Flags flags(kProgram, kSummary);
  flags.String("bdf", "", "PCI address of the GPU, DDDD:BB:SS.F (see: lspci -D -d 10de:). Required.");
  flags.Bool("dry_run", "Check everything and print each write instead of making it.");
  flags.String("sysfs_root", "/sys", "Where sysfs is mounted (tests point it at a fake tree).");
  flags.String("cmdline", "/proc/cmdline", "The kernel command line to check.");
  flags.Int("timeout", 10, 1, 3600,
            "Seconds a driver may take to unbind or bind, and one sysfs write to return.");
  absl::Status parsed = flags.Parse(argc, argv);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (!parsed.ok()) return Usage(std::string(parsed.message()));
  if (!flags.positional().empty()) {
    return Usage("unexpected argument '" + flags.positional()[0] + "'");
  }
  if (flags.Get("bdf").empty()) return Usage("--bdf is required");
  absl::StatusOr<std::string> bdf = CanonicalBdf(flags.Get("bdf"));
  if (!bdf.ok()) return Usage(std::string(bdf.status().message()));
  const bool dry_run = flags.IsSet("dry_run");
  const std::string root = flags.Get("sysfs_root");
  const bool real_host = root == "/sys";
  if (real_host && !dry_run && geteuid() != 0) {
    return Fail("must run as root to write to sysfs (or use --dry_run)");
  }
  std::shared_ptr<SysfsFs> fs = RealSysfsFs();

  // 1. The IOMMU.
  IommuEvidence evidence;
  evidence.cmdline_file = flags.Get("cmdline");
  absl::StatusOr<std::string> cmdline = ReadFile(evidence.cmdline_file);
  if (!cmdline.ok()) return Fail(std::string(cmdline.status().message()));
  evidence.cmdline = *cmdline;
  evidence.iommu_class_dir = root + "/class/iommu";
  evidence.dmar_active = HasDmarUnit(*fs, evidence.iommu_class_dir);
  absl::StatusOr<IommuFindings> iommu = CheckIntelIommu(evidence);
  if (!iommu.ok()) return Fail(std::string(iommu.status().message()));
  for (const std::string& w : iommu->warnings) Warn(w);
  for (const std::string& n : iommu->notes) Info(n);

  // 2. vfio-pci.
  const std::string vfio_dir = root + "/bus/pci/drivers/vfio-pci";
  if (fs->Exists(vfio_dir)) {
    Info("vfio-pci is loaded");
  } else if (!real_host) {
    return Fail(absl::StrCat("vfio-pci is not loaded under ", root, " (", vfio_dir,
                             " missing); not running modprobe for a non-/sys root"));
  } else if (dry_run) {
    Info("DRY-RUN: would run 'modprobe vfio-pci'");
  } else {
    absl::Status s = Modprobe("vfio-pci");
    if (!s.ok()) return Fail(std::string(s.message()));
    if (!fs->Exists(vfio_dir)) {
      return Fail(absl::StrCat("modprobe vfio-pci succeeded but ", vfio_dir,
                               " is missing; check dmesg"));
    }
    Info("loaded vfio-pci");
  }

  // 3-5. The device: the MUX's own sequence.
  PciSysfsOptions options;
  options.sysfs_root = root;
  options.driver_timeout = absl::Seconds(flags.GetInt("timeout"));
  PciSysfs sysfs(options, fs);
  VfioPreparationOptions prep;
  prep.dry_run = dry_run;
  prep.report = Info;
  absl::StatusOr<VfioPreparation> done = PrepareGpuForVfio(sysfs, *bdf, prep);
  if (!done.ok()) return Fail(std::string(done.status().message()));

  // 6. CC mode.
  const std::string reset_path = sysfs.DevicePath(*bdf) + "/reset_method";
  std::printf(
      "\n%s: next, turn on confidential-computing mode with NVIDIA gpu-admin-tools\n"
      "(https://github.com/NVIDIA/gpu-admin-tools), on this host, while no VM has the GPU:\n\n"
      "  python3 nvidia_gpu_tools.py --gpu-bdf %s --set-cc-mode on --reset-after-cc-mode-switch\n"
      "  python3 nvidia_gpu_tools.py --gpu-bdf %s --query-cc-mode     # expect: CC mode is on\n\n"
      "The mode takes effect only after a reset, and any later reset ends the CC\n"
      "session. If the tool resets through the OS and fails because reset is disabled,\n"
      "run 'echo default > %s', switch the mode, then run\n"
      "this command again to disable reset again.\n",
      kProgram, bdf->c_str(), bdf->c_str(), reset_path.c_str());
  if (dry_run) Info("dry run: nothing was written");
  return 0;
}

}  // namespace gputravel
