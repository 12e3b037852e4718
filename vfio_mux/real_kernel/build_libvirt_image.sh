#!/usr/bin/env bash
# Makes the root file system image of the libvirt scenarios: the base
# (build_rootfs_base.sh) with libvirtd set up to run as root without systemd,
# the guest init, the TDX domain template and the guest test binaries with
# the shared libraries they load; an ext4 image (sparse) that run_scenario.sh
# boots as /dev/vdb, read-only (QEMU's snapshot=on).
#
# Usage: build_libvirt_image.sh OUT_IMG BASE_TAR INIT TEMPLATE BINARY...
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
source "$(dirname "$0")/image_lib.sh"

out=$1; base=$2; init=$3; template=$4; shift 4
command -v mke2fs >/dev/null || image_fail "mke2fs missing: install e2fsprogs (tools/setup.sh does)"
[ "$(id -u)" = 0 ] || image_fail "unpacking the root file system keeps its owners only as root; run the build as root (CI does)"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
tar -xpf "$base" -C "$root" --numeric-owner
[ -x "$root/usr/sbin/libvirtd" ] || image_fail "$base has no libvirtd: rebuild it (build_rootfs_base.sh)"

# libvirtd resolves its QEMU user before it reads qemu.conf; Debian creates
# it in libvirt-daemon-system, which the base does not install.
echo "libvirt-qemu:x:64055:64055:Libvirt Qemu:/var/lib/libvirt:/usr/sbin/nologin" >> "$root/etc/passwd"
echo "libvirt-qemu:x:64055:" >> "$root/etc/group"
echo "kvm:x:64056:" >> "$root/etc/group"
# QEMU as root, without security driver, cgroups or namespaces: the guest
# has no systemd, no SELinux or AppArmor, and one user.
mkdir -p "$root/etc/libvirt"
cat > "$root/etc/libvirt/qemu.conf" <<'CONF'
user = "root"
group = "root"
dynamic_ownership = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
CONF
mkdir -p "$root"/var/log/libvirt/qemu "$root"/var/lib/libvirt/qemu "$root"/var/lib/libvirt/images \
  "$root"/var/cache/libvirt "$root"/data "$root"/guest
# libvirt probes every qemu-system binary it finds at the first define (tens
# of seconds each under TCG); the tests use only qemu-system-x86_64.
rm -f "$root"/usr/bin/qemu-system-i386 "$root"/usr/bin/qemu-system-x86_64-microvm
touch "$root/etc/gt-rootfs"

install -m 0755 "$init" "$root/guest/guest_init.sh"
install -m 0644 "$template" "$root/guest/tdx-guest.xml"
copy_binaries "$root" /guest "$@"

rm -f "$out"
mke2fs -q -t ext4 -F -L gtroot -d "$root" "$out" 1536M ||
  image_fail "mke2fs -d of the libvirt root file system failed"
