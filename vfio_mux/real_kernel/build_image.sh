#!/usr/bin/env bash
# Builds the boot image for the real-kernel tests from Debian's packages: the
# cloud kernel (linux-image-cloud-amd64) and the modules VFIO needs, busybox
# (busybox-static), the guest's init and test binaries with every shared
# library they load. Writes OUT_KERNEL (a copy of the vmlinuz the modules
# belong to) and OUT_INITRD (a gzip'd newc cpio).
#
# Usage: build_image.sh OUT_KERNEL OUT_INITRD INIT BINARY...
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"

out_kernel=$1; out_initrd=$2; init=$3; shift 3

fail() {
  echo "real_kernel image: $*" >&2
  exit 1
}

# The newest cloud kernel installed (its modules must be present too).
kver=""
for v in /boot/vmlinuz-*-cloud-amd64; do
  [ -e "$v" ] || continue
  cand=${v#/boot/vmlinuz-}
  [ -d "/lib/modules/$cand" ] || continue
  if [ -z "$kver" ] || [ "$(printf '%s\n%s\n' "$kver" "$cand" | sort -V | tail -1)" = "$cand" ]; then
    kver=$cand
  fi
done
[ -n "$kver" ] || fail "no cloud kernel in /boot with modules in /lib/modules: install linux-image-cloud-amd64 (tools/setup.sh does)"
[ -r "/boot/vmlinuz-$kver" ] || fail "/boot/vmlinuz-$kver is not readable by $(id -un): run as root, or make it readable (chmod a+r)"
busybox=/bin/busybox
[ -x "$busybox" ] || fail "$busybox missing: install busybox-static (tools/setup.sh does)"
if ldd "$busybox" >/dev/null 2>&1; then
  fail "$busybox is dynamically linked: install busybox-static, not busybox"
fi
command -v cpio >/dev/null || fail "cpio missing: install cpio (tools/setup.sh does)"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,run,data,guest,lib,lib64,etc}
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
  [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
install -m 0755 "$init" "$root/init"

# The modules VFIO, virtio and the test disk need, with their dependencies.
moddir=/lib/modules/$kver
mkdir -p "$root$moddir"
wanted="vfio-pci vfio_iommu_type1 virtio_net virtio_pci virtio_blk"
for m in $wanted; do
  deps=$(modprobe -S "$kver" --show-depends "$m" 2>/dev/null | awk '$1=="insmod"{print $2}') ||
    fail "modprobe --show-depends $m for $kver failed"
  [ -n "$deps" ] || fail "module $m not found for kernel $kver"
  for f in $deps; do
    mkdir -p "$root$(dirname "$f")"
    cp "$f" "$root$f"
  done
done
cp "$moddir"/modules.order "$moddir"/modules.builtin* "$root$moddir/"
depmod -b "$root" "$kver"
echo "$kver" > "$root/etc/kernel-version"

# The binaries and every shared library they load, at the paths ldd names.
for b in "$@"; do
  install -m 0755 "$b" "$root/guest/$(basename "$b")"
  while read -r lib; do
    [ -n "$lib" ] || continue
    mkdir -p "$root$(dirname "$lib")"
    [ -e "$root$lib" ] || cp -L "$lib" "$root$lib"
  done < <(ldd "$b" | awk '/=> \//{print $3} /^\t\//{print $1}')
done

cp "/boot/vmlinuz-$kver" "$out_kernel"
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) | gzip -1 > "$out_initrd"
