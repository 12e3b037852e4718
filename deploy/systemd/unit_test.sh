#!/usr/bin/env bash
# Checks the invariants of gputravel-mux.service that the backends depend on,
# and (where systemd-analyze exists) that systemd accepts the unit.
set -euo pipefail

UNIT=""
for c in "${TEST_SRCDIR:-}/${TEST_WORKSPACE:-gputravel}/deploy/systemd/gputravel-mux.service" \
         "$(dirname "$0")/gputravel-mux.service"; do
  if [[ -f "$c" ]]; then UNIT=$c; break; fi
done
[[ -n "$UNIT" ]] || { echo "gputravel-mux.service not found"; exit 1; }

FAILURES=0
has() { grep -qxF -- "$1" "$UNIT" || { echo "FAIL: missing line: $1"; FAILURES=$((FAILURES + 1)); }; }
lacks() { ! grep -qE -- "$1" "$UNIT" || { echo "FAIL: forbidden: $1"; FAILURES=$((FAILURES + 1)); }; }

has "ExecStart=/usr/local/bin/vfio_mux --config=/etc/gputravel/mux.json"
has "Restart=on-failure"
has "NoNewPrivileges=yes"
has "ProtectSystem=strict"
# The audit log is the route journal: without a writable log directory the
# MUX refuses to start.
has "LogsDirectory=gputravel"
has "CapabilityBoundingSet=CAP_SYS_PTRACE CAP_DAC_READ_SEARCH"
# Each would silently break a backend: /sys read-only, QEMU's /proc hidden,
# or the libvirt socket out of reach.
lacks "^ProtectKernelTunables=(yes|true|1)"
lacks "^ProtectProc=(invisible|noaccess|ptraceable)"
lacks "^InaccessiblePaths=.*(/sys|/run/libvirt)"
lacks "^RestrictAddressFamilies=.*~.*AF_UNIX"
lacks "^PrivateNetwork=(yes|true|1)"

if command -v systemd-analyze >/dev/null 2>&1; then
  TMP=$(mktemp -d /tmp/unit_test.XXXXXX)
  trap 'rm -rf "$TMP"' EXIT
  cp "$UNIT" "$TMP/gputravel-mux.service"
  # The binary is not installed here; every other complaint is a failure.
  out=$(SYSTEMD_LOG_LEVEL=warning systemd-analyze verify "$TMP/gputravel-mux.service" 2>&1 || true)
  other=$(printf '%s\n' "$out" | grep -v "/usr/local/bin/vfio_mux is not executable" | grep -v '^$' || true)
  if [[ -n "$other" ]]; then
    echo "FAIL: systemd-analyze verify:"
    echo "$other"
    FAILURES=$((FAILURES + 1))
  fi
else
  echo "systemd-analyze not installed: skipping the syntax check"
fi

if [[ $FAILURES -gt 0 ]]; then exit 1; fi
echo "gputravel-mux.service checks passed"
