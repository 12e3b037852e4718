#!/usr/bin/env bash
# Installs the Debian packages GPU Travelling builds and tests with, when any
# is missing. Idempotent; needs root (or sudo) only when something is missing.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap bazel-platforms bazel-rules-java
  g++ pkg-config
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libssl-dev openssl
  libvirt-dev libvirt-clients libxml2-utils
  nlohmann-json3-dev
  libgtest-dev libgmock-dev
  libsqlite3-dev
  libabsl-dev
  # Metrics (metrics/): prometheus-cpp's registry and HTTP exposer.
  prometheus-cpp-dev
  systemd
  # The real-kernel tests (vfio_mux/real_kernel): a QEMU guest (TCG) booting
  # Debian's cloud kernel from a busybox initramfs, with an ext4 test disk.
  qemu-system-x86 linux-image-cloud-amd64 busybox-static cpio e2fsprogs kmod
  # Their libvirt scenarios: a Debian root file system (libvirtd, QEMU) built
  # by mmdebstrap from Debian's archive.
  mmdebstrap
  # The network baseline (bench/headline_bench): namespaces, veth and tc;
  # its plot.
  iproute2 python3-matplotlib
  # The Python package (python/): gRPC client and stubs generated at build
  # time, the PyTorch example trainer (CPU), and an optimized BLAS for it
  # (Debian's python3-torch otherwise runs on the reference BLAS, ~4x slower).
  python3-grpcio python3-grpc-tools python3-protobuf python3-torch python3-numpy
  libopenblas0-pthread
  # The clang checks (tools/checks.sh, tools/fuzz.sh): clang-14, its
  # sanitizer and libFuzzer runtimes, and llvm-symbolizer for their reports.
  clang-14 libclang-rt-14-dev llvm-14
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "setup: missing packages (${missing[*]}) and not root: run as root or install them" >&2
    exit 1
  fi
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
