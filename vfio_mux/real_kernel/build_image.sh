#!/usr/bin/env bash
# Builds the boot image for the real-kernel tests from Debian's packages: the
# cloud kernel (linux-image-cloud-amd64) and the modules VFIO needs, busybox
# (busybox-static), the guest's init and test binaries with every shared
# library they load. Writes OUT_KERNEL (a copy of the vmlinuz the modules
# belong to) and OUT_INITRD (a gzip'd newc cpio). The libvirt scenarios boot
# the same pair and switch to their root file system (build_libvirt_image.sh).
#
# Usage: build_image.sh OUT_KERNEL OUT_INITRD INIT BINARY...
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
source "$(dirname "$0")/image_lib.sh"

out_kernel=$1; out_initrd=$2; init=$3; shift 3

kver=$(cloud_kernel_version)
busybox=/bin/busybox
[ -x "$busybox" ] || image_fail "$busybox missing: install busybox-static (tools/setup.sh does)"
if ldd "$busybox" >/dev/null 2>&1; then
  image_fail "$busybox is dynamically linked: install busybox-static, not busybox"
fi
command -v cpio >/dev/null || image_fail "cpio missing: install cpio (tools/setup.sh does)"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,run,data,guest,lib,lib64,etc,newroot}
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
  [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
install -m 0755 "$init" "$root/init"

# The modules VFIO, virtio and the test disks need, with their dependencies.
copy_modules "$root" "$kver" vfio-pci vfio_iommu_type1 virtio_net virtio_pci virtio_blk
echo "$kver" > "$root/etc/kernel-version"

copy_binaries "$root" /guest "$@"

cp "/boot/vmlinuz-$kver" "$out_kernel"
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) | gzip -1 > "$out_initrd"
