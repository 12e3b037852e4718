#!/usr/bin/env bash
# Prepares a host for GPU Travelling: checks the IOMMU, loads vfio-pci, binds
# one NVIDIA GPU to vfio-pci through sysfs and disables its reset, so the MUX
# (vfio_mux) can route it between TDX guests without wiping its CC session.
# Every write is read back. See docs/operations-host.md.
set -euo pipefail

PROG=$(basename "$0")
SYSFS_ROOT=/sys
CMDLINE_FILE=/proc/cmdline
BDF=""
DRY_RUN=0
TIMEOUT=10

usage() {
  cat <<USAGE
Usage: $PROG --bdf DDDD:BB:SS.F [options]

Prepares one NVIDIA GPU for the GPU Travelling MUX:
  1. checks that the Intel IOMMU is on (intel_iommu=on on the kernel
     command line, or on by the kernel's default) and iommu=pt;
  2. makes sure the vfio-pci driver is loaded (modprobe vfio-pci);
  3. checks the device is an NVIDIA GPU and its IOMMU group is viable;
  4. binds it to vfio-pci (driver_override, unbind, drivers_probe);
  5. disables its reset (reset_method), so releasing it keeps its CC state;
  6. prints the NVIDIA gpu-admin-tools step that turns CC mode on.

Options:
  --bdf BDF          PCI address of the GPU (see: lspci -D -d 10de:)
  --dry-run          check everything, print each write instead of doing it
  --sysfs-root DIR   sysfs mount point (default /sys; tests use a fake tree)
  --cmdline FILE     kernel command line to check (default /proc/cmdline)
  --timeout SECONDS  how long a driver may take to unbind or bind (default 10)
  -h, --help         this text

Exit status: 0 prepared (or would be, with --dry-run), 1 a check or step
failed (the message says what to do), 2 bad usage.
USAGE
}

die() {
  echo "$PROG: error: $*" >&2
  exit 1
}
usage_error() {
  echo "$PROG: $*" >&2
  echo "Try '$PROG --help'." >&2
  exit 2
}
info() { echo "$PROG: $*"; }
warn() { echo "$PROG: warning: $*" >&2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --bdf) [[ $# -ge 2 ]] || usage_error "--bdf needs a value"; BDF=$2; shift 2 ;;
    --bdf=*) BDF=${1#*=}; shift ;;
    --sysfs-root) [[ $# -ge 2 ]] || usage_error "--sysfs-root needs a value"; SYSFS_ROOT=$2; shift 2 ;;
    --sysfs-root=*) SYSFS_ROOT=${1#*=}; shift ;;
    --cmdline) [[ $# -ge 2 ]] || usage_error "--cmdline needs a value"; CMDLINE_FILE=$2; shift 2 ;;
    --cmdline=*) CMDLINE_FILE=${1#*=}; shift ;;
    --timeout) [[ $# -ge 2 ]] || usage_error "--timeout needs a value"; TIMEOUT=$2; shift 2 ;;
    --timeout=*) TIMEOUT=${1#*=}; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
done

[[ -n "$BDF" ]] || usage_error "--bdf is required"
# The BDF ends up in paths: only the strict form gets through.
BDF=${BDF,,}
[[ "$BDF" =~ ^[0-9a-f]{4,8}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]$ ]] ||
  usage_error "invalid PCI address '$BDF': expected DDDD:BB:SS.F such as 0000:98:00.0 (see lspci -D)"
[[ "$TIMEOUT" =~ ^[0-9]+$ && "$TIMEOUT" -gt 0 ]] ||
  usage_error "--timeout must be a positive number of seconds"

DEVICES="$SYSFS_ROOT/bus/pci/devices"
DEV="$DEVICES/$BDF"
REAL_HOST=0
[[ "$SYSFS_ROOT" == /sys ]] && REAL_HOST=1

if [[ $REAL_HOST -eq 1 && $DRY_RUN -eq 0 && $EUID -ne 0 ]]; then
  die "must run as root to write to sysfs (or use --dry-run)"
fi

# --- helpers ----------------------------------------------------------------

trim() {
  local s=$1
  s=${s#"${s%%[![:space:]]*}"}
  s=${s%"${s##*[![:space:]]}"}
  printf '%s' "$s"
}

read_attr() { # PATH -> trimmed content
  local v
  v=$(cat "$1" 2>/dev/null) || die "cannot read $1"
  trim "$v"
}

driver_of() { # BDF -> bound driver name, or empty
  local link="$DEVICES/$1/driver"
  if [[ -L "$link" ]]; then
    basename "$(readlink "$link")"
  fi
}

# One bounded write: unbind blocks while the device's users keep it open.
sysfs_write() { # VALUE PATH STEP
  local value=$1 path=$2 step=$3
  if [[ $DRY_RUN -eq 1 ]]; then
    info "DRY-RUN: would write '$value' to $path ($step)"
    return 0
  fi
  local err rc=0
  # shellcheck disable=SC2016 # $1 and $2 expand in the inner shell
  err=$(timeout "$TIMEOUT" bash -c 'printf "%s" "$1" > "$2"' _ "$value" "$path" 2>&1) || rc=$?
  if [[ $rc -ne 0 ]]; then
    if [[ $rc -eq 124 ]]; then
      die "$step: writing '$value' to $path did not return within ${TIMEOUT}s; the kernel is waiting for the device's users (fuser -v /dev/vfio/* /dev/nvidia*); stop them and retry"
    fi
    die "$step: writing '$value' to $path failed: ${err:-exit $rc}; see dmesg"
  fi
}

wait_for_driver() { # WANT STEP  (WANT empty: no driver)
  local want=$1 step=$2 now deadline
  deadline=$((SECONDS + TIMEOUT))
  while :; do
    now=$(driver_of "$BDF")
    [[ "$now" == "$want" ]] && return 0
    if [[ $SECONDS -ge $deadline ]]; then
      echo "$now"
      return 1
    fi
    sleep 0.1
  done
}

# --- 1. IOMMU on the kernel command line ------------------------------------

[[ -r "$CMDLINE_FILE" ]] || die "cannot read $CMDLINE_FILE"
CMDLINE=" $(cat "$CMDLINE_FILE") "
# intel_iommu= takes a comma list (on,sm_on,...); the last one given wins.
# Kernels built with CONFIG_INTEL_IOMMU_DEFAULT_ON need none: an active
# Intel IOMMU shows as a dmar unit under /sys/class/iommu.
IOMMU_OPTS=""
for word in $CMDLINE; do
  [[ "$word" == intel_iommu=* ]] && IOMMU_OPTS=",${word#intel_iommu=},"
done
GRUB_HINT="add 'intel_iommu=on iommu=pt' to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub, enable VT-d in the firmware, and reboot"
if [[ "$IOMMU_OPTS" == *",off,"* ]]; then
  die "intel_iommu=off is on the kernel command line ($CMDLINE_FILE): remove it; $GRUB_HINT"
elif [[ "$IOMMU_OPTS" != *",on,"* ]]; then
  if compgen -G "$SYSFS_ROOT/class/iommu/dmar*" > /dev/null; then
    info "intel_iommu=on is not on the kernel command line, but the kernel enabled the Intel IOMMU by default ($SYSFS_ROOT/class/iommu has dmar units)"
  else
    die "intel_iommu=on is not on the kernel command line ($CMDLINE_FILE) and no Intel IOMMU is active ($SYSFS_ROOT/class/iommu has no dmar unit): $GRUB_HINT"
  fi
fi
if [[ "$CMDLINE" != *" iommu=pt "* ]]; then
  warn "iommu=pt is not on the kernel command line: host devices will use DMA translation (slower); add it next to intel_iommu=on"
fi
info "kernel command line: IOMMU enabled"

# --- 2. vfio-pci loaded -------------------------------------------------------

VFIO_DIR="$SYSFS_ROOT/bus/pci/drivers/vfio-pci"
if [[ ! -d "$VFIO_DIR" ]]; then
  if [[ $REAL_HOST -eq 0 ]]; then
    die "vfio-pci is not loaded under $SYSFS_ROOT ($VFIO_DIR missing); not running modprobe for a non-/sys root"
  elif [[ $DRY_RUN -eq 1 ]]; then
    info "DRY-RUN: would run 'modprobe vfio-pci'"
  else
    modprobe vfio-pci || die "modprobe vfio-pci failed: install the kernel's vfio modules (linux-image-*) and check dmesg"
    [[ -d "$VFIO_DIR" ]] || die "modprobe vfio-pci succeeded but $VFIO_DIR is missing; check dmesg"
    info "loaded vfio-pci"
  fi
else
  info "vfio-pci is loaded"
fi

# --- 3. the device and its IOMMU group ----------------------------------------

[[ -e "$DEV" ]] || die "PCI device $BDF not found ($DEV does not exist); check the address with lspci -D -d 10de:"
VENDOR=$(read_attr "$DEV/vendor")
CLASS=$(read_attr "$DEV/class")
if [[ "${VENDOR,,}" != 0x10de || "${CLASS,,}" != 0x03* ]]; then
  die "PCI device $BDF is not an NVIDIA GPU (vendor $VENDOR, class $CLASS; expected vendor 0x10de, class 0x03xxxx); check the address with lspci -D -d 10de:"
fi
DRIVER=$(driver_of "$BDF")
info "found NVIDIA GPU $BDF (device $(read_attr "$DEV/device")), driver: ${DRIVER:-none}"

[[ -L "$DEV/iommu_group" ]] || die "GPU $BDF has no IOMMU group ($DEV/iommu_group missing): the IOMMU is not active; enable VT-d in the firmware and boot with intel_iommu=on"
GROUP=$(basename "$(readlink "$DEV/iommu_group")")
offenders=()
for member in "$DEV/iommu_group/devices/"*; do
  [[ -e "$member" || -L "$member" ]] || continue
  m=$(basename "$member")
  [[ "$m" == "$BDF" ]] && continue # about to be bound
  mdrv=$(driver_of "$m")
  mclass=$(read_attr "$DEVICES/$m/class")
  if [[ -z "$mdrv" || "$mdrv" == vfio-pci || "${mclass,,}" == 0x0604* ]]; then
    continue
  fi
  offenders+=("$m (class $mclass) bound to $mdrv")
done
if [[ ${#offenders[@]} -gt 0 ]]; then
  die "IOMMU group $GROUP of $BDF is not viable: $(IFS=';'; echo "${offenders[*]}"). Every device in the group must be bound to vfio-pci or to no driver: unbind them (echo BDF > $SYSFS_ROOT/bus/pci/devices/BDF/driver/unbind) or bind them to vfio-pci, then re-run"
fi
info "IOMMU group $GROUP is viable"

# --- 4. bind to vfio-pci ----------------------------------------------------

# The override first, so nothing else claims the device between unbind and probe.
sysfs_write vfio-pci "$DEV/driver_override" "setting driver_override"
if [[ $DRY_RUN -eq 0 ]]; then
  got=$(read_attr "$DEV/driver_override")
  [[ "$got" == vfio-pci ]] || die "wrote vfio-pci to $DEV/driver_override but it reads '$got'; something else (udev, libvirt managed='yes') is changing it"
fi
if [[ "$DRIVER" == vfio-pci ]]; then
  info "$BDF is already bound to vfio-pci"
else
  if [[ -n "$DRIVER" ]]; then
    sysfs_write "$BDF" "$DEV/driver/unbind" "unbinding from $DRIVER"
    if [[ $DRY_RUN -eq 0 ]] && ! left=$(wait_for_driver "" "unbind"); then
      die "$BDF is still bound to '$left' ${TIMEOUT}s after the unbind: driver $DRIVER will not let go; stop its users (nvidia-persistenced, display servers, fuser -v /dev/nvidia*) and retry"
    fi
  fi
  sysfs_write "$BDF" "$SYSFS_ROOT/bus/pci/drivers_probe" "probing for vfio-pci"
  if [[ $DRY_RUN -eq 0 ]]; then
    if ! got=$(wait_for_driver vfio-pci "probe"); then
      if [[ -z "$got" ]]; then
        die "vfio-pci did not claim $BDF within ${TIMEOUT}s; see dmesg (a host framebuffer holding the BAR, a device in D3cold)"
      fi
      die "$BDF was claimed by '$got' instead of vfio-pci; check $DEV/driver_override and udev rules"
    fi
    info "bound $BDF to vfio-pci"
  fi
fi

# --- 5. disable reset -------------------------------------------------------

RESET_METHOD_FILE="$DEV/reset_method"
[[ -e "$RESET_METHOD_FILE" ]] || die "$RESET_METHOD_FILE does not exist: disabling reset needs Linux 5.15 or later; without it vfio-pci resets the GPU whenever a VM releases it"
METHODS=$(read_attr "$RESET_METHOD_FILE")
if [[ -z "$METHODS" ]]; then
  info "reset is already disabled for $BDF"
else
  info "reset methods of $BDF were: $METHODS (restore later with: echo '$METHODS' > $RESET_METHOD_FILE, or echo default)"
  # "\n" is the empty list to the kernel.
  sysfs_write $'\n' "$RESET_METHOD_FILE" "disabling reset"
  if [[ $DRY_RUN -eq 0 ]]; then
    got=$(read_attr "$RESET_METHOD_FILE")
    [[ -z "$got" ]] || die "wrote an empty list to $RESET_METHOD_FILE but it reads '$got'; check dmesg"
    info "disabled reset for $BDF"
  fi
fi

# --- 6. CC mode -------------------------------------------------------------

cat <<NEXT

$PROG: next, turn on confidential-computing mode with NVIDIA gpu-admin-tools
(https://github.com/NVIDIA/gpu-admin-tools), on this host, while no VM has the GPU:

  python3 nvidia_gpu_tools.py --gpu-bdf $BDF --set-cc-mode on --reset-after-cc-mode-switch
  python3 nvidia_gpu_tools.py --gpu-bdf $BDF --query-cc-mode     # expect: CC mode is on

The mode takes effect only after a reset, and any later reset ends the CC
session. If the tool resets through the OS and fails because reset is disabled,
run 'echo default > $RESET_METHOD_FILE', switch the mode, then run
$PROG --bdf $BDF again to disable reset again.
NEXT
if [[ $DRY_RUN -eq 1 ]]; then
  info "dry run: nothing was written"
fi
