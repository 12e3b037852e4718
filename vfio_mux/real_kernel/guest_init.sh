#!/bin/sh
# /init of the real-kernel test guest (busybox): loads the modules the MUX
# needs, mounts the ext4 test disk at /data, runs the guest tests of the
# scenario named by gt.scenario= on the kernel command line, and writes their
# GoogleTest XML and exit code to the second serial port (ttyS1), where
# run_scenario.sh reads them. Powers off in every case.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tracefs tracefs /sys/kernel/tracing

out=/dev/ttyS1
stty -F "$out" raw -echo 2>/dev/null
finish() {
  echo "GT-EXIT $1" > "$out"
  sync
  poweroff -f
}
guest_error() {
  echo "GT-ERROR $*" > "$out"
  finish 100
}

scenario=$(sed -n 's/.*gt\.scenario=\([A-Za-z0-9_]*\).*/\1/p' /proc/cmdline)
[ -n "$scenario" ] || guest_error "no gt.scenario= on the kernel command line"
echo "GT-KERNEL $(uname -r)" > "$out"

# Busybox modprobe ignores softdeps: vfio_iommu_type1 is loaded by name.
for m in virtio_pci virtio_net virtio_blk vfio-pci vfio_iommu_type1; do
  modprobe "$m" || guest_error "modprobe $m failed (see the console log)"
done
[ -d /sys/kernel/iommu_groups/0 ] || guest_error "no IOMMU groups: intel_iommu=on did not take effect"

mkdir -p /data
n=0
while [ ! -b /dev/vda ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
mount -t ext4 /dev/vda /data || guest_error "mounting the ext4 test disk /dev/vda failed"

/guest/real_kernel_guest --gtest_filter="$scenario.*" --gtest_output=xml:/tmp/result.xml \
  > /dev/console 2>&1
rc=$?
if [ -s /tmp/result.xml ]; then
  { echo "GT-XML-BEGIN"; cat /tmp/result.xml; echo "GT-XML-END"; } > "$out"
fi
umount /data 2>/dev/null
finish "$rc"
