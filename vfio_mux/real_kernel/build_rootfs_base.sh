#!/usr/bin/env bash
# Builds the base root file system of the libvirt scenarios with mmdebstrap
# (variant minbase) from this machine's Debian apt sources: libvirt's daemon
# and QEMU driver, QEMU (x86) and qemu-img, as Debian ships them. Writes a
# tarball; build_libvirt_image.sh adds the tests and makes the disk image.
# Needs root (mmdebstrap's root mode) and Debian's archive.
#
# Usage: build_rootfs_base.sh OUT_TAR
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"

out=$1
fail() {
  echo "real_kernel libvirt root file system: $*" >&2
  exit 1
}

command -v mmdebstrap >/dev/null || fail "mmdebstrap missing: install mmdebstrap (tools/setup.sh does)"
[ "$(id -u)" = 0 ] || fail "mmdebstrap's root mode needs root; run the build as root (CI does)"
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$suite" ] || fail "no VERSION_CODENAME in /etc/os-release: cannot tell which Debian suite to use"

# The enabled apt source files that name Debian's archive (others, such as a
# vendor's repository, are not reachable from CI).
sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  grep -Eq '^[^#]*(deb\.debian\.org|security\.debian\.org|snapshot\.debian\.org)' "$f" && sources+=("$f")
done
[ ${#sources[@]} -gt 0 ] || fail "no apt source in /etc/apt names Debian's archive (deb.debian.org)"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
if ! mmdebstrap --variant=minbase \
    --include=libvirt-daemon,libvirt-daemon-driver-qemu,qemu-system-x86,qemu-utils \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$suite" "$out" "${sources[@]}" > "$log" 2>&1; then
  cat "$log" >&2
  fail "mmdebstrap $suite from ${sources[*]} failed (its output above): is Debian's archive reachable?"
fi
echo "real_kernel libvirt root file system: mmdebstrap took $(( $(date +%s) - start ))s" >&2
