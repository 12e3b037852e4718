#!/usr/bin/env bash
# sysfs_dropin.sh against a fake sysfs tree: the drop-in opens the configured
# GPUs' device directories and the PCI bus files a bind or return writes,
# nothing broader, refuses what is not a configured, present PCI device, and
# (where systemd-analyze is installed) systemd accepts the unit with it.
set -euo pipefail

source "$(dirname "$0")/test_lib.sh"
GEN=$(find_file sysfs_dropin.sh)
UNIT=$(find_file gputravel-mux.service)


TMP=$(mktemp -d /tmp/sysfs_dropin_test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
SYS="$TMP/sys"
gpu_dir="$SYS/devices/pci0000:97/0000:97:01.0/0000:98:00.0"
nic_dir="$SYS/devices/pci0000:17/0000:17:00.0"
mkdir -p "$gpu_dir" "$nic_dir" "$SYS/bus/pci/devices" "$SYS/bus/pci/drivers/nvidia" \
         "$SYS/bus/pci/drivers/vfio-pci" "$SYS/bus/pci/drivers/e1000e"
touch "$SYS/bus/pci/drivers_probe" "$SYS/bus/pci/rescan"
ln -s ../../../devices/pci0000:97/0000:97:01.0/0000:98:00.0 "$SYS/bus/pci/devices/0000:98:00.0"
ln -s ../../../devices/pci0000:17/0000:17:00.0 "$SYS/bus/pci/devices/0000:17:00.0"
ln -s ../../../../bus/pci/drivers/nvidia "$gpu_dir/driver"
ln -s ../../../bus/pci/drivers/e1000e "$nic_dir/driver"
cat > "$TMP/mux.json" <<JSON
{
  "backend": "sysfs",
  "domains": ["td-a"],
  "sysfs": {"sysfs_root": "/sys", "gpus": [{"name": "gpu0", "bdf": "0000:98:00.0"}]}
}
JSON

out=$("$GEN" --sysfs-root "$SYS" "$TMP/mux.json") || fail "generator failed on a good config"
paths=$(printf '%s\n' "$out" | grep '^ReadWritePaths=' | sed 's/^ReadWritePaths=//' | sort)
want=$(sort <<WANT
/sys/devices/pci0000:97/0000:97:01.0/0000:98:00.0
/sys/bus/pci/drivers_probe
-/sys/bus/pci/drivers/nvidia/unbind
-/sys/bus/pci/drivers/vfio-pci/unbind
WANT
)
[[ "$paths" == "$want" ]] || fail "writable paths:"$'\n'"$paths"$'\n'"want:"$'\n'"$want"
printf '%s\n' "$out" | grep -qx '\[Service\]' || fail "no [Service] section"
# Nothing broader than one device or one bus file; not the NIC.
printf '%s\n' "$out" | grep -qE '^ReadWritePaths=-?/sys(/devices|/bus/pci|/bus/pci/devices)?/?$' \
  && fail "a broad sysfs path is writable"
printf '%s\n' "$out" | grep -q '0000:17:00.0\|e1000e\|rescan\|new_id' && fail "an unconfigured device or bus file is writable"

# --bdf works alone, short form included.
out=$("$GEN" --sysfs-root "$SYS" --bdf 98:00.0) || fail "--bdf 98:00.0 refused"
printf '%s\n' "$out" | grep -qx 'ReadWritePaths=/sys/devices/pci0000:97/0000:97:01.0/0000:98:00.0' \
  || fail "--bdf did not open the GPU's directory"

# Refusals: no GPU, a malformed address, a device that is not there.
"$GEN" --sysfs-root "$SYS" >/dev/null 2>&1 && fail "no GPU accepted"
"$GEN" --sysfs-root "$SYS" --bdf '../../..' >/dev/null 2>&1 && fail "a path accepted as a BDF"
"$GEN" --sysfs-root "$SYS" --bdf 0000:99:00.0 >/dev/null 2>&1 && fail "a missing device accepted"

# systemd accepts the unit with the generated drop-in.
if command -v systemd-analyze >/dev/null 2>&1; then
  mkdir -p "$TMP/unit"
  { cat "$UNIT"; echo; "$GEN" --sysfs-root "$SYS" "$TMP/mux.json"; } > "$TMP/unit/gputravel-mux.service"
  verify=$(cd "$TMP/unit" && SYSTEMD_LOG_LEVEL=warning systemd-analyze verify \
             "$TMP/unit/gputravel-mux.service" 2>&1 || true)
  other=$(printf '%s\n' "$verify" | grep -v "/usr/local/bin/vfio_mux is not executable" | grep -v '^$' || true)
  [[ -z "$other" ]] || fail "systemd-analyze verify with the drop-in: $other"
fi

if [[ $FAILURES -gt 0 ]]; then exit 1; fi
echo "sysfs_dropin.sh checks passed"
