#!/usr/bin/env bash
# Validates tdx-guest.xml against the installed libvirt domain schema. Where
# the schema (libvirt 9.0) rejects only the TDX element, validates a copy
# without the TDX-ONLY block so the rest of the domain is still checked.
set -euo pipefail

VALIDATOR=/usr/bin/virt-xml-validate # the sandbox has no PATH guarantees
XML=""
for c in "${TEST_SRCDIR:-}/${TEST_WORKSPACE:-gputravel}/deploy/libvirt/tdx-guest.xml" \
         "$(dirname "$0")/tdx-guest.xml"; do
  if [[ -f "$c" ]]; then XML=$c; break; fi
done
[[ -n "$XML" ]] || { echo "tdx-guest.xml not found"; exit 1; }
[[ -x "$VALIDATOR" ]] || { echo "$VALIDATOR missing: apt-get install libvirt-clients"; exit 1; }

TMP=$(mktemp -d /tmp/validate_test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

fail() { echo "FAIL: $*"; exit 1; }

# The parts the MUX relies on, whatever the schema version.
grep -q "<launchSecurity type='tdx'>" "$XML" || fail "no <launchSecurity type='tdx'>"
grep -q "<hostdev mode='subsystem' type='pci' managed='no'>" "$XML" ||
  fail "the GPU hostdev must be managed='no' (the MUX owns the vfio-pci binding)"
grep -q "<alias name='ua-" "$XML" || fail "the hostdev alias must be a user alias (ua-)"
[[ $(grep -c "TDX-ONLY BEGIN" "$XML") -eq 1 && $(grep -c "TDX-ONLY END" "$XML") -eq 1 ]] ||
  fail "expected exactly one TDX-ONLY BEGIN/END pair"

if out=$("$VALIDATOR" "$XML" domain 2>&1); then
  echo "tdx-guest.xml validates in full (this libvirt knows TDX)"
  exit 0
fi
echo "full file does not validate against this libvirt's schema:"
echo "$out"
# Only the TDX element may be what the schema rejects.
[[ "$out" == *"Extra element launchSecurity"* ]] ||
  fail "the schema rejects something other than <launchSecurity>"

sed '/TDX-ONLY BEGIN/,/TDX-ONLY END/d' "$XML" > "$TMP/tdx-guest-without-tdx.xml"
! grep -qE '^[[:space:]]*<launchSecurity' "$TMP/tdx-guest-without-tdx.xml" || fail "strip left launchSecurity behind"
grep -q "<hostdev" "$TMP/tdx-guest-without-tdx.xml" || fail "strip removed the hostdev"
out=$("$VALIDATOR" "$TMP/tdx-guest-without-tdx.xml" domain 2>&1) ||
  fail "without the TDX element it still does not validate: $out"
echo "tdx-guest.xml validates without the TDX-only block (libvirt 9.0 schema)"
