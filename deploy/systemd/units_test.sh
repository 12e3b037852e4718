#!/usr/bin/env bash
# Every daemon's systemd unit (orchestrator, holder agent, emulated GPU, MUX)
# with each drop-in it ships: `systemd-analyze verify` reports nothing at all
# (a warning fails as an error does), each keeps its ExecStart and the
# hardening directives (so an edit that drops one fails here), and
# `systemd-analyze security --offline` rates it within its threshold.
# Without systemd-analyze the test fails and says so: set
# GPUTRAVEL_SKIP_SYSTEMD_ANALYZE=1 to run only the textual checks.
set -euo pipefail

source "$(dirname "$0")/test_lib.sh"

# has UNIT_FILE LINE: the exact line is in the unit.
has() { grep -qxF -- "$2" "$1" || fail "$(basename "$1"): missing line: $2"; }
lacks() { ! grep -qE -- "$2" "$1" || fail "$(basename "$1"): forbidden: $2"; }

ORCH=$(find_file gputravel-orchestrator.service)
HOLDER=$(find_file gputravel-holder@.service)
GPU=$(find_file gputravel-gpu@.service)
MUX=$(find_file gputravel-mux.service)
TDX=$(find_file tdx-attestation.conf)
MUX_SYSFS=$(find_file gputravel-mux.service.d/sysfs-backend.conf)
MUX_EMULATED=$(find_file gputravel-mux.service.d/emulated-backend.conf)
TMPFILES=$(find_file gputravel.tmpfiles.conf)
SYSUSERS=$(find_file gputravel.sysusers.conf)

# What the daemons take (util/daemon_main.h: --config; each main's paths).
has "$ORCH" "ExecStart=/usr/local/bin/orchestrator --config=/etc/gputravel/orchestrator.json"
has "$ORCH" "ConditionPathExists=/etc/gputravel/orchestrator.json"
has "$HOLDER" "ExecStart=/usr/local/bin/holder_agent --config=/etc/gputravel/holder-%i.json"
has "$HOLDER" "ConditionPathExists=/etc/gputravel/holder-%i.json"
has "$GPU" "ExecStart=/usr/local/bin/emulated_gpu_daemon --config=/etc/gputravel/gpu-%i.json"
has "$GPU" "ConditionPathExists=/etc/gputravel/gpu-%i.json"
has "$MUX" "ExecStart=/usr/local/bin/vfio_mux --config=/etc/gputravel/mux.json"

# Hardening every unit keeps.
for u in "$ORCH" "$HOLDER" "$GPU" "$MUX"; do
  for line in "Restart=on-failure" "NoNewPrivileges=yes" "PrivateTmp=yes" \
              "ProtectSystem=strict" "ProtectHome=yes" "CapabilityBoundingSet=" \
              "AmbientCapabilities=" "LockPersonality=yes" "MemoryDenyWriteExecute=yes" \
              "UMask=0077" "SystemCallFilter=@system-service" "SystemCallArchitectures=native" \
              "RestrictNamespaces=yes" "RestrictSUIDSGID=yes" "RestrictRealtime=yes" \
              "ProtectKernelTunables=yes" "ProtectKernelModules=yes" "ProtectKernelLogs=yes" \
              "ProtectControlGroups=yes" "ProtectClock=yes" "ProtectHostname=yes" \
              "PrivateMounts=yes" "RemoveIPC=yes" "LimitCORE=0" \
              "RuntimeDirectoryMode=0700"; do
    has "$u" "$line"
  done
  grep -qE '^RuntimeDirectory=gputravel/[a-z%-]+$' "$u" \
    || fail "$(basename "$u"): RuntimeDirectory=gputravel/NAME missing (its own, under /run/gputravel)"
  grep -qE '^SystemCallFilter=~.*@privileged' "$u" || fail "$(basename "$u"): @privileged not filtered out"
  grep -qE '^SystemCallFilter=~.*@debug' "$u" || fail "$(basename "$u"): @debug (ptrace) not filtered out"
  grep -qE '^SystemCallFilter=~.*@mount' "$u" || fail "$(basename "$u"): @mount not filtered out"
  lacks "$u" "^CapabilityBoundingSet=.*CAP_"
  lacks "$u" "^AmbientCapabilities=.+"
  lacks "$u" "^ConfigurationDirectory="
  lacks "$u" "^ReadWritePaths=.*(/etc|/sys)"
  # A directory of its own, not the whole of /run/gputravel: stopping one
  # daemon must not remove another's sockets.
  lacks "$u" "^RuntimeDirectory=gputravel$"
done
# No daemon but the MUX runs as root: it writes root-owned sysfs files.
for u in "$ORCH" "$HOLDER" "$GPU"; do
  has "$u" "User=gputravel"
  has "$u" "Group=gputravel"
  has "$u" "PrivateDevices=yes"
  has "$u" "ProtectProc=invisible"
  lacks "$u" "^User=root"
  lacks "$u" "^DynamicUser="
  lacks "$u" "AF_NETLINK|AF_PACKET"
done
has "$ORCH" "StateDirectory=gputravel/orchestrator"
has "$ORCH" "StateDirectoryMode=0700"
has "$ORCH" "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"
# SQLite as root (the TDX drop-in) fchowns its WAL file: refused, not killed.
has "$ORCH" "SystemCallErrorNumber=EPERM"
has "$HOLDER" "StateDirectory=gputravel/holder-%i"
has "$HOLDER" "StateDirectoryMode=0700"
has "$HOLDER" "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"
# The bounce ring's directory, and nothing else outside its own.
has "$HOLDER" "ReadWritePaths=/run/gputravel/shm/%i"
[[ $(grep -c '^ReadWritePaths=' "$HOLDER") -eq 1 ]] || fail "holder unit: more writable paths than its bounce ring"
# The emulated GPU: Unix sockets only, no network at all, nothing writable
# but its sockets.
has "$GPU" "RestrictAddressFamilies=AF_UNIX"
has "$GPU" "PrivateNetwork=yes"
lacks "$GPU" "^(ReadWritePaths|StateDirectory)="
has "$MUX" "User=root"
has "$MUX" "StateDirectoryMode=0700"
has "$MUX" "LogsDirectoryMode=0700"
# The drop-ins change only what they say.
grep -qxF "User=root" "$TDX" || fail "tdx-attestation.conf: must run the daemon as root"
[[ $(grep -cE '^[A-Za-z]+=' "$TDX") -eq 4 ]] || fail "tdx-attestation.conf sets more than User, Group and its two paths"
grep -qxF "ReadWritePaths=/sys/kernel/config/tsm/report" "$TDX" || fail "tdx-attestation.conf: configfs-tsm not writable"
grep -qE '^(CapabilityBoundingSet|AmbientCapabilities)=' "$TDX" && fail "tdx-attestation.conf grants capabilities"
grep -qxF "User=gputravel" "$MUX_EMULATED" || fail "emulated-backend.conf: must run the MUX as gputravel"
[[ $(grep -cE '^[A-Za-z]+=' "$MUX_EMULATED") -eq 2 ]] || fail "emulated-backend.conf sets more than User and Group"
grep -qE '^u gputravel ' "$SYSUSERS" || fail "gputravel.sysusers.conf does not make user gputravel"
grep -qxF "d /run/gputravel/shm 0755 root root -" "$TMPFILES" || fail "gputravel.tmpfiles.conf: no /run/gputravel/shm"

# The example configurations use the directories the units make writable.
example_has() {
  grep -qE "^  \"$2\": \"$3\",?\$" "$1" || fail "$(basename "$1"): \"$2\" is not \"$3\" (the unit's directory)"
}
example_has "$(find_file ../examples/orchestrator-tdx.json)" state_dir /var/lib/gputravel/orchestrator
HOLDER_EXAMPLE=$(find_file ../examples/holder-tdx.json)
example_has "$HOLDER_EXAMPLE" name hospital-a
example_has "$HOLDER_EXAMPLE" state_dir /var/lib/gputravel/holder-hospital-a
example_has "$HOLDER_EXAMPLE" bounce_dir /run/gputravel/shm/hospital-a
for mux_example in mux-sysfs.json mux-libvirt.json; do
  f=$(find_file "../examples/$mux_example")
  example_has "$f" state_file '/var/lib/gputravel/[^/"]+'
  example_has "$f" audit_log '/var/log/gputravel/[^/"]+'
done

if ! command -v systemd-analyze >/dev/null 2>&1; then
  if [[ "${GPUTRAVEL_SKIP_SYSTEMD_ANALYZE:-}" == "1" ]]; then
    echo "SKIPPED (GPUTRAVEL_SKIP_SYSTEMD_ANALYZE=1): systemd-analyze verify and security"
  else
    fail "systemd-analyze is not installed, so systemd's own checks of the units did not run;" \
         "install systemd, or set GPUTRAVEL_SKIP_SYSTEMD_ANALYZE=1 to skip them knowingly"
  fi
else
  TMP=$(mktemp -d /tmp/units_test.XXXXXX)
  trap 'rm -rf "$TMP"' EXIT
  # The built daemons stand where the units expect them installed: verify
  # checks that ExecStart is executable, and each must take --config.
  mkdir -p "$TMP/bin"
  for b in orchestrator/orchestrator holder_agent/holder_agent \
           device/emulated_gpu_daemon vfio_mux/vfio_mux; do
    built="${TEST_SRCDIR:-}/${TEST_WORKSPACE:-gputravel}/$b"
    if [[ ! -x "$built" ]]; then
      fail "built daemon $b not found (run under bazel test)"
      continue
    fi
    ln -s "$built" "$TMP/bin/$(basename "$b")"
    help=$("$built" --help 2>&1) || fail "$b --help failed"
    for flag in --config --log_format --v; do
      grep -qF -- "$flag" <<<"$help" || fail "$b --help does not list $flag"
    done
  done
  # check VARIANT UNIT_FILE INSTANCE_NAME THRESHOLD [DROPIN...]: the unit,
  # named as systemd would load the instance, with the drop-ins in its .d
  # directory, as installed under /etc/systemd/system.
  check() {
    local variant=$1 unit=$2 name=$3 threshold=$4
    shift 4
    local dir="$TMP/$variant"
    mkdir -p "$dir/$name.d"
    sed "s|/usr/local/bin/|$TMP/bin/|" "$unit" > "$dir/$name"
    for d in "$@"; do cp "$d" "$dir/$name.d/"; done
    local out rc=0
    # --man=no: Documentation= points at files installed on a host, not here.
    out=$(cd "$dir" && SYSTEMD_LOG_LEVEL=info systemd-analyze verify --man=no "$dir/$name" 2>&1) || rc=$?
    if [[ $rc -ne 0 || -n "$out" ]]; then
      fail "systemd-analyze verify $variant ($name) exited $rc:"
      printf '%s\n' "$out"
    fi
    local report
    if ! report=$(cd "$dir" && systemd-analyze security --offline=true --no-pager \
                    --threshold="$threshold" "$dir/$name" 2>&1); then
      fail "systemd-analyze security $variant: exposure above $((threshold / 10)).$((threshold % 10)):"
      printf '%s\n' "$report" | grep -E '✗|Overall' || printf '%s\n' "$report"
    else
      echo "$variant: $(printf '%s\n' "$report" | grep 'Overall exposure')"
    fi
  }
  # The user and the shared-memory directories, as installed: made under a
  # scratch root, the holder line filled in as docs/operations.md shows.
  ROOT="$TMP/root"
  mkdir -p "$ROOT/etc"
  cp "$SYSUSERS" "$TMP/sysusers.conf"
  out=$(systemd-sysusers --root="$ROOT" "$TMP/sysusers.conf" 2>&1) || fail "systemd-sysusers failed: $out"
  grep -qiE 'ignoring|fail|invalid' <<<"$out" && fail "systemd-sysusers $SYSUSERS: $out"
  grep -q '^gputravel:x:[0-9]*:[0-9]*:.*:/usr/sbin/nologin$' "$ROOT/etc/passwd" \
    || fail "systemd-sysusers made no system user gputravel without a shell"
  sed 's|^# d /run/gputravel/shm/NAME|d /run/gputravel/shm/hospital-a|' "$TMPFILES" > "$TMP/tmpfiles.conf"
  out=$(systemd-tmpfiles --root="$ROOT" --create "$TMP/tmpfiles.conf" 2>&1) \
    || fail "systemd-tmpfiles $TMPFILES: $out"
  [[ -z "$out" ]] || fail "systemd-tmpfiles $TMPFILES: $out"
  uid=$(sed -n 's/^gputravel:x:\([0-9]*\):.*/\1/p' "$ROOT/etc/passwd")
  [[ "$(stat -c '%a %u' "$ROOT/run/gputravel/shm/hospital-a" 2>/dev/null)" == "700 $uid" ]] \
    || fail "the holder's shared-memory directory is not 0700 and gputravel's"
  [[ "$(stat -c '%a' "$ROOT/run/gputravel/shm" 2>/dev/null)" == "755" ]] \
    || fail "/run/gputravel/shm is not 0755"
  # Thresholds in tenths of systemd's 0.0-10.0 exposure scale.
  check orchestrator "$ORCH" gputravel-orchestrator.service 15
  check orchestrator-tdx "$ORCH" gputravel-orchestrator.service 20 "$TDX"
  check holder "$HOLDER" gputravel-holder@hospital-a.service 15
  check holder-template "$HOLDER" gputravel-holder@.service 15
  check holder-tdx "$HOLDER" gputravel-holder@hospital-a.service 20 "$TDX"
  check gpu "$GPU" gputravel-gpu@0.service 10
  check gpu-template "$GPU" gputravel-gpu@.service 10
  check mux "$MUX" gputravel-mux.service 25
  check mux-sysfs "$MUX" gputravel-mux.service 25 "$MUX_SYSFS"
  check mux-emulated "$MUX" gputravel-mux.service 25 "$MUX_EMULATED"
fi

if [[ $FAILURES -gt 0 ]]; then exit 1; fi
echo "systemd unit checks passed"
