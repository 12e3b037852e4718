#!/usr/bin/env bash
# Tests prepare_host.sh, and through it `vfio_mux prepare` (the MUX's own
# preparation code), against fake sysfs trees (and a fake /proc/cmdline)
# built in a temporary directory. Nothing here touches the real /sys.
set -euo pipefail

find_file() { # RELATIVE-PATH
  local c
  for c in "${TEST_SRCDIR:-}/${TEST_WORKSPACE:-gputravel}/$1" \
           "$(dirname "$0")/../../$1" "$(dirname "$0")/../../bazel-bin/$1"; do
    if [[ -f "$c" ]]; then echo "$c"; return; fi
  done
  echo "$1 not found" >&2
  exit 1
}
SCRIPT=$(find_file deploy/host/prepare_host.sh)
MUX=$(find_file vfio_mux/vfio_mux)
export GPUTRAVEL_VFIO_MUX=$MUX

TMP=$(mktemp -d /tmp/prepare_host_test.XXXXXX)
KERNEL_PID=""
cleanup() {
  if [[ -n "$KERNEL_PID" ]]; then kill "$KERNEL_PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

GPU=0000:98:00.0
FAILURES=0
CASE=""
OUT=""
RC=0

# --- fake tree --------------------------------------------------------------

make_tree() { # DIR -> DIR/sys, DIR/cmdline
  local sys=$1/sys drv
  mkdir -p "$sys/devices/pci0000:00" "$sys/bus/pci/devices" "$sys/kernel/iommu_groups"
  for drv in nvidia vfio-pci snd_hda_intel pcieport; do
    mkdir -p "$sys/bus/pci/drivers/$drv"
    : > "$sys/bus/pci/drivers/$drv/bind"
    : > "$sys/bus/pci/drivers/$drv/unbind"
  done
  : > "$sys/bus/pci/drivers_probe"
  echo "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro intel_iommu=on iommu=pt quiet" > "$1/cmdline"
}

add_dev() { # DIR BDF VENDOR CLASS DRIVER GROUP
  local sys=$1/sys bdf=$2 vendor=$3 class=$4 driver=$5 group=$6
  local d="$sys/devices/pci0000:00/$bdf"
  mkdir -p "$d" "$sys/kernel/iommu_groups/$group/devices"
  echo "$vendor" > "$d/vendor"
  echo "0x2331" > "$d/device"
  echo "$class" > "$d/class"
  echo "(null)" > "$d/driver_override"
  echo "flr bus" > "$d/reset_method"
  : > "$d/reset"
  ln -s "../../../kernel/iommu_groups/$group" "$d/iommu_group"
  ln -s "../../../../devices/pci0000:00/$bdf" "$sys/kernel/iommu_groups/$group/devices/$bdf"
  ln -s "../../../devices/pci0000:00/$bdf" "$sys/bus/pci/devices/$bdf"
  if [[ -n "$driver" ]]; then
    ln -s "../../../bus/pci/drivers/$driver" "$d/driver"
  fi
}

# Plays the kernel for one device: consumes unbind and drivers_probe writes.
fake_kernel() { # SYS BDF
  local sys=$1 bdf=$2
  local d="$sys/devices/pci0000:00/$bdf" drv
  while :; do
    for drv in "$sys"/bus/pci/drivers/*; do
      if [[ -s "$drv/unbind" ]]; then
        : > "$drv/unbind"
        rm -f "$d/driver"
      fi
    done
    if [[ -s "$sys/bus/pci/drivers_probe" ]]; then
      : > "$sys/bus/pci/drivers_probe"
      if [[ ! -L "$d/driver" ]]; then
        ln -s "../../../bus/pci/drivers/$(tr -d '\n' < "$d/driver_override")" "$d/driver"
      fi
    fi
    sleep 0.05
  done
}

new_host() { # NAME -> sets H; GPU on nvidia in group 42
  H="$TMP/$1"
  make_tree "$H"
  add_dev "$H" "$GPU" 0x10de 0x030200 nvidia 42
}

run() { # ARGS...
  RC=0
  OUT=$("$SCRIPT" "$@" 2>&1) || RC=$?
}

run_on() { # ARGS... (against $H)
  run --sysfs-root "$H/sys" --cmdline "$H/cmdline" "$@"
}

fail() {
  echo "FAIL [$CASE]: $*"
  echo "---- output (exit $RC) ----"
  echo "$OUT"
  echo "---------------------------"
  FAILURES=$((FAILURES + 1))
}
expect_rc() { [[ "$RC" -eq "$1" ]] || fail "exit status $RC, want $1"; }
expect_out() { [[ "$OUT" == *"$1"* ]] || fail "output lacks: $1"; }
expect_no_out() { [[ "$OUT" != *"$1"* ]] || fail "output has: $1"; }
expect_file() { # PATH CONTENT
  local got
  got=$(cat "$1")
  [[ "$got" == "$2" ]] || fail "$1 is '$got', want '$2'"
}

# --- cases --------------------------------------------------------------------

CASE="help"
run --help
expect_rc 0
expect_out "Usage: prepare_host.sh --bdf"
expect_out "--dry-run"
expect_out "--sysfs-root"

CASE="binary-help-names-the-steps-and-flags"
RC=0
OUT=$("$MUX" prepare --help 2>&1) || RC=$?
expect_rc 0
expect_out "Usage: vfio_mux prepare"
expect_out "--dry_run"
expect_out "--sysfs_root"
expect_out "binds it to vfio-pci (driver_override, unbind, drivers_probe)"
expect_out "disables its reset"
RC=0
OUT=$("$MUX" --help 2>&1) || RC=$?
expect_rc 0
expect_out "vfio_mux prepare --bdf=BDF"

CASE="binary-not-found"
run --mux "$TMP/no-such-vfio_mux" --bdf "$GPU" --dry-run
expect_rc 1
expect_out "vfio_mux not found"
expect_out "bazel build //vfio_mux"

CASE="bad-timeout-is-bad-usage"
run --bdf "$GPU" --timeout 0 --dry-run
expect_rc 2
expect_out "--timeout"

CASE="missing-bdf"
run --dry-run
expect_rc 2
expect_out "--bdf is required"

CASE="malformed-bdf"
run --bdf ../../etc --dry-run
expect_rc 2
expect_out "invalid PCI address"

CASE="unknown-argument"
run --bdf "$GPU" --frobnicate
expect_rc 2

CASE="dry-run-plans-every-write"
new_host dry
run_on --bdf "$GPU" --dry-run
expect_rc 0
expect_out "IOMMU group 42 is viable"
expect_out "would write 'vfio-pci' to $H/sys/bus/pci/devices/$GPU/driver_override"
expect_out "would write '$GPU' to $H/sys/bus/pci/devices/$GPU/driver/unbind (unbinding from nvidia)"
expect_out "would write '$GPU' to $H/sys/bus/pci/drivers_probe"
expect_out "reset methods of $GPU were: flr bus"
expect_out "nvidia_gpu_tools.py --gpu-bdf $GPU --set-cc-mode on --reset-after-cc-mode-switch"
expect_out "nvidia_gpu_tools.py --gpu-bdf $GPU --query-cc-mode"
expect_out "nothing was written"
expect_file "$H/sys/devices/pci0000:00/$GPU/driver_override" "(null)"
expect_file "$H/sys/devices/pci0000:00/$GPU/reset_method" "flr bus"

CASE="uppercase-bdf-is-normalized"
run_on --bdf "0000:98:00.0" --dry-run
expect_rc 0
run_on --bdf "0000:9A:00.0" --dry-run
expect_rc 1
expect_out "0000:9a:00.0 not found"

CASE="no-intel-iommu"
new_host noiommu
echo "ro quiet iommu=pt" > "$H/cmdline"
run_on --bdf "$GPU" --dry-run
expect_rc 1
expect_out "intel_iommu=on is not on the kernel command line"
expect_out "update-grub"

CASE="intel-iommu-off"
new_host iommuoff
echo "ro intel_iommu=off iommu=pt" > "$H/cmdline"
run_on --bdf "$GPU" --dry-run
expect_rc 1
expect_out "intel_iommu=off is on the kernel command line"

CASE="intel-iommu-option-list"
new_host iommulist
echo "ro intel_iommu=on,sm_on iommu=pt" > "$H/cmdline"
run_on --bdf "$GPU" --dry-run
expect_rc 0

CASE="intel-iommu-on-by-kernel-default"
new_host iommudefault
echo "ro quiet iommu=pt" > "$H/cmdline"
mkdir -p "$H/sys/class/iommu/dmar0"
run_on --bdf "$GPU" --dry-run
expect_rc 0
expect_out "enabled the Intel IOMMU by default"

CASE="no-iommu-pt-warns"
new_host nopt
echo "ro intel_iommu=on" > "$H/cmdline"
run_on --bdf "$GPU" --dry-run
expect_rc 0
expect_out "warning: iommu=pt is not on the kernel command line"

CASE="missing-device"
new_host missing
run_on --bdf 0000:99:00.0 --dry-run
expect_rc 1
expect_out "PCI device 0000:99:00.0 not found"
expect_out "lspci -D -d 10de:"

CASE="not-nvidia"
new_host nic
add_dev "$H" 0000:17:00.0 0x8086 0x020000 "" 7
run_on --bdf 0000:17:00.0 --dry-run
expect_rc 1
expect_out "is not an NVIDIA GPU (vendor 0x8086, class 0x020000"

CASE="not-a-gpu"
new_host audio
add_dev "$H" 0000:98:00.1 0x10de 0x040300 snd_hda_intel 42
run_on --bdf 0000:98:00.1 --dry-run
expect_rc 1
expect_out "is not an NVIDIA GPU"

CASE="non-viable-group"
run_on --bdf "$GPU" --dry-run   # same host: the audio function is in group 42
expect_rc 1
expect_out "IOMMU group 42 of GPU $GPU is not viable: 0000:98:00.1 (class 0x040300) is bound to snd_hda_intel"
expect_file "$H/sys/devices/pci0000:00/$GPU/driver_override" "(null)"

CASE="bridge-and-unbound-members-are-fine"
new_host bridge
add_dev "$H" 0000:97:00.0 0x8086 0x060400 pcieport 42
add_dev "$H" 0000:98:00.2 0x10de 0x0c8000 "" 42
run_on --bdf "$GPU" --dry-run
expect_rc 0
expect_out "IOMMU group 42 is viable"

CASE="no-iommu-group"
new_host nogroup
rm "$H/sys/devices/pci0000:00/$GPU/iommu_group"
run_on --bdf "$GPU" --dry-run
expect_rc 1
expect_out "has no IOMMU group"

CASE="vfio-pci-not-loaded"
new_host novfio
rm -rf "$H/sys/bus/pci/drivers/vfio-pci"
run_on --bdf "$GPU"
expect_rc 1
expect_out "vfio-pci is not loaded"
expect_out "not running modprobe for a non-/sys root"

CASE="already-on-vfio-disables-reset"
new_host onvfio
rm "$H/sys/devices/pci0000:00/$GPU/driver"
ln -s ../../../bus/pci/drivers/vfio-pci "$H/sys/devices/pci0000:00/$GPU/driver"
run_on --bdf "$GPU"
expect_rc 0
expect_out "already bound to vfio-pci"
expect_out "disabled reset for $GPU"
expect_file "$H/sys/devices/pci0000:00/$GPU/driver_override" "vfio-pci"
expect_file "$H/sys/devices/pci0000:00/$GPU/reset_method" ""
# Idempotent.
run_on --bdf "$GPU"
expect_rc 0
expect_out "reset is already disabled"

CASE="driver-that-will-not-unbind"
new_host stuck   # no fake kernel: the unbind write lands but nothing changes
run_on --bdf "$GPU" --timeout 1
expect_rc 1
expect_out "driver link $H/sys/bus/pci/devices/$GPU/driver still reads 'nvidia' after 1s"
expect_out "will not let go"

CASE="full-bind-with-fake-kernel"
new_host full
fake_kernel "$H/sys" "$GPU" &
KERNEL_PID=$!
run_on --bdf "$GPU" --timeout 5
kill "$KERNEL_PID" 2>/dev/null || true
wait "$KERNEL_PID" 2>/dev/null || true
KERNEL_PID=""
expect_rc 0
expect_out "bound $GPU to vfio-pci"
expect_out "disabled reset for $GPU"
expect_out "--set-cc-mode on"
[[ "$(basename "$(readlink "$H/sys/devices/pci0000:00/$GPU/driver")")" == vfio-pci ]] ||
  fail "driver link does not point at vfio-pci"

CASE="probe-that-binds-nothing"
new_host noclaim
( # a kernel that unbinds but whose probe never binds
  d="$H/sys/devices/pci0000:00/$GPU"
  while :; do
    if [[ -s "$H/sys/bus/pci/drivers/nvidia/unbind" ]]; then
      : > "$H/sys/bus/pci/drivers/nvidia/unbind"; rm -f "$d/driver"
    fi
    sleep 0.05
  done
) &
KERNEL_PID=$!
run_on --bdf "$GPU" --timeout 1
kill "$KERNEL_PID" 2>/dev/null || true
wait "$KERNEL_PID" 2>/dev/null || true
KERNEL_PID=""
expect_rc 1
expect_out "GPU $GPU: probing for vfio-pci"
expect_out "vfio-pci did not claim the device"
expect_no_out "disabled reset"

CASE="missing-reset-method"
new_host noreset
rm "$H/sys/devices/pci0000:00/$GPU/driver"
ln -s ../../../bus/pci/drivers/vfio-pci "$H/sys/devices/pci0000:00/$GPU/driver"
rm "$H/sys/devices/pci0000:00/$GPU/reset_method"
run_on --bdf "$GPU"
expect_rc 1
expect_out "Linux 5.15"

if [[ $FAILURES -gt 0 ]]; then
  echo "$FAILURES check(s) failed"
  exit 1
fi
echo "all prepare_host.sh / vfio_mux prepare checks passed"
