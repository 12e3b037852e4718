#!/usr/bin/env bash
# Prepares a host for GPU Travelling by running `vfio_mux prepare`: the MUX's
# own sysfs code (vfio_mux/sysfs/vfio_preparation.h) checks the IOMMU, loads
# vfio-pci, binds one NVIDIA GPU to vfio-pci and disables its reset, so the
# MUX can route it between TDX guests without wiping its CC session. This
# script only finds the binary and passes the options on.
# See docs/operations-host.md.
set -euo pipefail

PROG=$(basename "$0")
HERE=$(cd "$(dirname "$0")" && pwd)
MUX=${GPUTRAVEL_VFIO_MUX:-}
ARGS=()

usage() {
  cat <<USAGE
Usage: $PROG --bdf DDDD:BB:SS.F [options]

Prepares one NVIDIA GPU for the GPU Travelling MUX by running
'vfio_mux prepare', the MUX's own preparation code:
  1. checks that the Intel IOMMU is on (intel_iommu=on on the kernel
     command line, or on by the kernel's default) and iommu=pt;
  2. makes sure the vfio-pci driver is loaded (modprobe vfio-pci);
  3. checks the device is an NVIDIA GPU and its IOMMU group will be viable;
  4. binds it to vfio-pci (driver_override, unbind, drivers_probe);
  5. disables its reset (reset_method), so releasing it keeps its CC state;
  6. prints the NVIDIA gpu-admin-tools step that turns CC mode on.
Every write is read back. 'vfio_mux prepare --help' says the same.

Options:
  --bdf BDF          PCI address of the GPU (see: lspci -D -d 10de:)
  --dry-run          check everything, print each write instead of doing it
  --sysfs-root DIR   sysfs mount point (default /sys; tests use a fake tree)
  --cmdline FILE     kernel command line to check (default /proc/cmdline)
  --timeout SECONDS  how long a driver may take to unbind or bind (default 10)
  --mux PATH         the vfio_mux binary (default: \$GPUTRAVEL_VFIO_MUX, else
                     vfio_mux on PATH, /usr/local/bin/vfio_mux, or the
                     repository's bazel-bin/vfio_mux/vfio_mux)
  -h, --help         this text

Exit status: 0 prepared (or would be, with --dry-run), 1 a check or step
failed (the message says what to do), 2 bad usage.
USAGE
}

usage_error() {
  echo "$PROG: $*" >&2
  echo "Try '$PROG --help'." >&2
  exit 2
}

value() { # FLAG ARGC
  [[ $2 -ge 2 ]] || usage_error "$1 needs a value"
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --bdf) value "$1" $#; ARGS+=("--bdf=$2"); shift 2 ;;
    --bdf=*) ARGS+=("--bdf=${1#*=}"); shift ;;
    --sysfs-root) value "$1" $#; ARGS+=("--sysfs_root=$2"); shift 2 ;;
    --sysfs-root=*) ARGS+=("--sysfs_root=${1#*=}"); shift ;;
    --cmdline) value "$1" $#; ARGS+=("--cmdline=$2"); shift 2 ;;
    --cmdline=*) ARGS+=("--cmdline=${1#*=}"); shift ;;
    --timeout) value "$1" $#; ARGS+=("--timeout=$2"); shift 2 ;;
    --timeout=*) ARGS+=("--timeout=${1#*=}"); shift ;;
    --mux) value "$1" $#; MUX=$2; shift 2 ;;
    --mux=*) MUX=${1#*=}; shift ;;
    --dry-run) ARGS+=("--dry_run"); shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
done

if [[ -z "$MUX" ]]; then
  for c in "$(command -v vfio_mux 2>/dev/null || true)" /usr/local/bin/vfio_mux \
           "$HERE/../../bazel-bin/vfio_mux/vfio_mux"; do
    if [[ -n "$c" && -x "$c" ]]; then MUX=$c; break; fi
  done
fi
if [[ -z "$MUX" || ! -x "$MUX" ]]; then
  echo "$PROG: error: vfio_mux not found${MUX:+ at $MUX}: build it (bazel build //vfio_mux) and install it (install -m 0755 bazel-bin/vfio_mux/vfio_mux /usr/local/bin/), or pass --mux PATH" >&2
  exit 1
fi

exec "$MUX" prepare "${ARGS[@]}"
