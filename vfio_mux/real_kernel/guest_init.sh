#!/bin/sh
# Init of the real-kernel test guest. From the initramfs (busybox) it loads
# the modules the MUX needs. With gt.root=DEV on the kernel command line (the
# libvirt scenarios) it then switches to that root file system
# (build_libvirt_image.sh) and runs again from there, where it starts
# virtlogd and libvirtd. Either way it mounts the ext4 test disk (/dev/vda)
# at /data, runs the guest tests of the scenario named by gt.scenario= (in
# the binary gt.binary=, default real_kernel_guest), and writes their
# GoogleTest XML and exit code to the second serial port (ttyS1), where
# run_scenario.sh reads them. Powers off in every case.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc 2>/dev/null
mount -t sysfs sys /sys 2>/dev/null
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null

out=/dev/ttyS1
stty -F "$out" raw -echo 2>/dev/null
power_off() {
  sync
  poweroff -f 2>/dev/null
  echo o > /proc/sysrq-trigger
  sleep 30
}
finish() {
  echo "GT-EXIT $1" > "$out"
  power_off
}
guest_error() {
  echo "GT-ERROR $*" > "$out"
  finish 100
}
cmdline_value() {
  sed -n "s/.*$1=\([^ ]*\).*/\1/p" /proc/cmdline
}

scenario=$(cmdline_value gt.scenario)
[ -n "$scenario" ] || guest_error "no gt.scenario= on the kernel command line"
binary=$(cmdline_value gt.binary)
binary=${binary:-real_kernel_guest}
rootdev=$(cmdline_value gt.root)

if [ ! -e /etc/gt-rootfs ]; then
  echo "GT-KERNEL $(uname -r)" > "$out"
  # Busybox modprobe ignores softdeps: vfio_iommu_type1 is loaded by name.
  for m in virtio_pci virtio_net virtio_blk vfio-pci vfio_iommu_type1; do
    modprobe "$m" || guest_error "modprobe $m failed (see the console log)"
  done
  [ -d /sys/kernel/iommu_groups/0 ] || guest_error "no IOMMU groups: intel_iommu=on did not take effect"
  if [ -n "$rootdev" ]; then
    n=0
    while [ ! -b "$rootdev" ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
    mount -t ext4 "$rootdev" /newroot || guest_error "mounting the root file system $rootdev failed"
    [ -x /newroot/guest/guest_init.sh ] || guest_error "$rootdev has no /guest/guest_init.sh"
    umount /sys/kernel/tracing 2>/dev/null
    for d in /dev /proc /sys /tmp; do mount --move "$d" "/newroot$d"; done
    exec switch_root /newroot /guest/guest_init.sh
  fi
else
  # The root file system of the libvirt scenarios: libvirtd as root, no
  # systemd (errors about dnsmasq, D-Bus and /dev/kvm are expected).
  mount -t tmpfs run /run
  mkdir -p /dev/pts /dev/shm /run/libvirt
  mount -t devpts devpts /dev/pts
  mount -t tmpfs shm /dev/shm
  virtlogd -d || guest_error "virtlogd did not start"
  libvirtd > /tmp/libvirtd.log 2>&1 &
  n=0
  while [ ! -S /run/libvirt/libvirt-sock ] && [ $n -lt 600 ]; do sleep 0.2; n=$((n + 1)); done
  if [ ! -S /run/libvirt/libvirt-sock ]; then
    cat /tmp/libvirtd.log > /dev/console
    guest_error "libvirtd did not open /run/libvirt/libvirt-sock within 120s (its log on the console)"
  fi
fi

mkdir -p /data
n=0
while [ ! -b /dev/vda ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
mount -t ext4 /dev/vda /data || guest_error "mounting the ext4 test disk /dev/vda failed"

[ -x "/guest/$binary" ] || guest_error "no test binary /guest/$binary in this image"
"/guest/$binary" --gtest_filter="$scenario.*" --gtest_output=xml:/tmp/result.xml \
  > /dev/console 2>&1
rc=$?
if [ "$rc" != 0 ] && [ -e /etc/gt-rootfs ]; then
  { echo "=== libvirtd log (tail) ==="; tail -n 40 /tmp/libvirtd.log
    for f in /var/log/libvirt/qemu/*.log; do
      [ -e "$f" ] && { echo "=== $f (tail) ==="; tail -n 15 "$f"; }
    done; } > /dev/console 2>&1
fi
if [ -s /tmp/result.xml ]; then
  { echo "GT-XML-BEGIN"; cat /tmp/result.xml; echo "GT-XML-END"; } > "$out"
fi
umount /data 2>/dev/null
finish "$rc"
