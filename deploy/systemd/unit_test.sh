#!/usr/bin/env bash
# Checks gputravel-mux.service (and the sysfs backend's drop-in): the
# invariants the backends depend on, the hardening P8 needs, and that
# systemd itself accepts both (`systemd-analyze verify`) and rates their
# exposure at most 2.5 (`systemd-analyze security --offline`).
# Without systemd-analyze the test fails and says so: set
# GPUTRAVEL_SKIP_SYSTEMD_ANALYZE=1 to run only the textual checks.
set -euo pipefail

# systemd-analyze's threshold is in tenths of its 0.0-10.0 exposure scale.
THRESHOLD=25

source "$(dirname "$0")/test_lib.sh"
UNIT=$(find_file gputravel-mux.service)
DROPIN=$(find_file gputravel-mux.service.d/sysfs-backend.conf)

has() { grep -qxF -- "$1" "$UNIT" || fail "missing line: $1"; }
lacks() { ! grep -qE -- "$1" "$UNIT" || fail "forbidden: $1"; }

has "ExecStart=/usr/local/bin/vfio_mux --config=/etc/gputravel/mux.json"
has "Restart=on-failure"
has "NoNewPrivileges=yes"
has "ProtectSystem=strict"
# The audit log is the route journal: without a writable log directory the
# MUX refuses to start.
has "LogsDirectory=gputravel"
# /proc/sys read-only; the PCI attributes the backends write opened again
# (only those: see the check below).
has "ProtectKernelTunables=yes"
# ATTACK (P8 in depth): ProtectKernelTunables makes /sys read-only, and
# "ReadWritePaths=/sys/bus/pci /sys/devices" opens nearly all of it again:
# every device's attributes (other GPUs', NICs', disks' remove/reset/
# driver_override/power), /sys/devices/system/{cpu,memory}/*/online,
# /sys/bus/pci/rescan and drivers/*/new_id. A MUX subverted through its API
# could take the host down. Secure: only the configured GPUs' device
# directories (and the bus files the sysfs backend needs) are writable,
# e.g. from a drop-in generated from mux.json's BDFs.
lacks "^ReadWritePaths=.*/sys/devices( |$)"
# What ships opens nothing under /sys at all: the writable sysfs files come
# from the drop-in sysfs_dropin.sh generates per host (sysfs_dropin_test).
lacks "^ReadWritePaths=.*/sys"
# Bounded threads and memory.
grep -qE '^TasksMax=[0-9]+$' "$UNIT" || fail "TasksMax=N missing"
grep -qE '^MemoryMax=[0-9]+[KMG]?$' "$UNIT" || fail "MemoryMax=N missing"
# No capability in the unit itself; CAP_SYS_PTRACE only in the sysfs
# backend's drop-in, and no ptrace system call either way.
has "CapabilityBoundingSet="
lacks "^CapabilityBoundingSet=.*CAP_"
lacks "^AmbientCapabilities=.+"
grep -qxF "CapabilityBoundingSet=CAP_SYS_PTRACE" "$DROPIN" \
  || fail "the sysfs drop-in must grant CAP_SYS_PTRACE (and only that)"
[[ $(grep -cE '^[A-Za-z]+=' "$DROPIN") -eq 1 ]] || fail "the sysfs drop-in sets more than CAP_SYS_PTRACE"
grep -qE '^SystemCallFilter=~.*@debug' "$UNIT" || fail "ptrace (@debug) must be filtered out"
grep -qE '^SystemCallFilter=~.*process_vm_readv' "$UNIT" || fail "process_vm_readv must be filtered out"
# /etc/gputravel (config, pinned callers, key) must not become writable:
# ConfigurationDirectory= would make it so, as would a ReadWritePaths on it.
lacks "^ConfigurationDirectory="
lacks "^ReadWritePaths=.*(/etc|/run/libvirt( |$))"
# Each would silently break a backend: QEMU's /proc hidden, or the libvirt
# socket out of reach.
lacks "^ProtectProc=(invisible|noaccess|ptraceable)"
lacks "^InaccessiblePaths=.*(/sys|/run/libvirt)"
lacks "^RestrictAddressFamilies=.*~.*AF_UNIX"
lacks "^PrivateNetwork=(yes|true|1)"

if ! command -v systemd-analyze >/dev/null 2>&1; then
  if [[ "${GPUTRAVEL_SKIP_SYSTEMD_ANALYZE:-}" == "1" ]]; then
    echo "SKIPPED (GPUTRAVEL_SKIP_SYSTEMD_ANALYZE=1): systemd-analyze verify and security"
  else
    fail "systemd-analyze is not installed, so systemd's own checks of the unit did not run;" \
         "install systemd, or set GPUTRAVEL_SKIP_SYSTEMD_ANALYZE=1 to skip them knowingly"
  fi
else
  TMP=$(mktemp -d /tmp/unit_test.XXXXXX)
  trap 'rm -rf "$TMP"' EXIT
  mkdir -p "$TMP/plain" "$TMP/sysfs"
  cp "$UNIT" "$TMP/plain/gputravel-mux.service"
  # The unit as systemd sees it with the drop-in: its settings appended.
  { cat "$UNIT"; echo; cat "$DROPIN"; } > "$TMP/sysfs/gputravel-mux.service"
  for variant in plain sysfs; do
    f="$TMP/$variant/gputravel-mux.service"
    # The binary is not installed here; every other complaint is a failure.
    out=$(cd "$TMP/$variant" && SYSTEMD_LOG_LEVEL=warning systemd-analyze verify "$f" 2>&1 || true)
    other=$(printf '%s\n' "$out" | grep -v "/usr/local/bin/vfio_mux is not executable" | grep -v '^$' || true)
    if [[ -n "$other" ]]; then
      fail "systemd-analyze verify ($variant):"
      echo "$other"
    fi
    if ! report=$(cd "$TMP/$variant" && systemd-analyze security --offline=true --no-pager \
                    --threshold="$THRESHOLD" gputravel-mux.service 2>&1); then
      fail "systemd-analyze security ($variant): exposure above 2.5:"
      printf '%s\n' "$report" | grep -E '✗|Overall' || printf '%s\n' "$report"
    else
      echo "$variant: $(printf '%s\n' "$report" | grep 'Overall exposure')"
    fi
  done
fi

if [[ $FAILURES -gt 0 ]]; then exit 1; fi
echo "gputravel-mux.service checks passed"
