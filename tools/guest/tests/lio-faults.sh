# shellcheck shell=sh
# lightiov_nvme.ko against a vNVMe that misbehaves on purpose (issue 29, item 7): sourced by the
# LightIOV frontend test's second boot (tests/linux/test_linux_frontend.c), whose lvmm runs with
# LVMM_FAULT_NVME naming a file function: its CMBSZ claims twice the CMB BAR and every third I/O
# completion is posted twice. The function has a class code the nvme driver skips: it waits
# unbound until lightiov_nvme.ko is loaded (lio-frontend-probe's load binds it too, as lionvme1).
# The host checks the console: the data read back, the duplicates logged and ignored, no
# warning, oops or BUG.
bb=/bin/busybox
fault_bdf=
for d in /sys/bus/pci/devices/*; do
	read -r c <"$d/class" && [ "$c" = 0x018000 ] && fault_bdf=${d##*/}
done
if [ -z "$fault_bdf" ]; then
	echo "LIO-FAULT no faulty function"
	return 1
fi
echo "LIO-FAULT function $fault_bdf"
echo lightiov_nvme >"/sys/bus/pci/devices/$fault_bdf/driver_override"
$bb insmod /lightiov_nvme.ko || echo "LIO-FAULT insmod failed"
echo "$fault_bdf" >/sys/bus/pci/drivers_probe
i=0
while [ ! -b /dev/lionvme0 ] && [ $i -lt 30 ]; do
	$bb sleep 1
	i=$((i + 1))
done
if [ ! -b /dev/lionvme0 ]; then
	echo "LIO-FAULT lightiov_nvme did not bind"
	return 1
fi
echo "LIO-FAULT bound"
# 1 MiB in 4 KiB direct writes and reads (256 commands each way), then 64 KiB direct reads. The
# pattern is busybox's first MiB: /dev/urandom costs a minute of emulated ChaCha20 on kvm_pvm hosts.
# The scratch files live in /dev, a devtmpfs (memory), not on the ext4 root: on kvm_pvm hosts the
# emulated ext4 write path costs seconds a MiB, and the files go with the VM.
p=/dev/fault-pat
r=/dev/fault-back
$bb dd if=$bb of=$p bs=1M count=1 2>/dev/null
$bb dd if=$p of=/dev/lionvme0 bs=4096 oflag=direct 2>/dev/null || echo "LIO-FAULT write failed"
$bb dd if=/dev/lionvme0 of=$r bs=4096 count=256 iflag=direct 2>/dev/null || echo "LIO-FAULT read failed"
$bb cmp $p $r && echo "LIO-FAULT verify 4k ok"
$bb dd if=/dev/lionvme0 of=$r bs=65536 count=16 iflag=direct 2>/dev/null || echo "LIO-FAULT read failed"
$bb cmp $p $r && echo "LIO-FAULT verify 64k ok"
$bb rmmod lightiov_nvme && echo "LIO-FAULT removed"
return 0
