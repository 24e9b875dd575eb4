# lvmm.test=fio (make bench-linux): fio from Debian's package on the vNVMe, 4 KiB random reads,
# O_DIRECT through io_uring, one run per queue depth, each run's JSON between two marker lines.
# fio and its libraries come from the read-only ext4 disk of build-bench-initramfs.sh (mounted
# on /opt; the other NVMe namespace is the one measured). Sourced by the test guest's /init (a
# fork costs seconds here: builtins apart from mount and fio).
# Parameters on the kernel command line: fio.qd=1,128 fio.runtime=S fio.ramp=S
qds=1,128
rt=5
ramp=1
dev=
tools=
read -r cmdline </proc/cmdline
for w in $cmdline; do
	case $w in
	fio.qd=*) qds=${w#fio.qd=} ;;
	fio.runtime=*) rt=${w#fio.runtime=} ;;
	fio.ramp=*) ramp=${w#fio.ramp=} ;;
	esac
done
# both namespaces appear once the nvme driver has probed them
i=0
while [ ! -b /dev/nvme1n1 ] && [ $i -lt 120 ]; do
	sleep 1
	i=$((i + 1))
done
for b in /dev/nvme*n1; do
	if [ -z "$tools" ] && mount -t ext4 -o ro "$b" /opt 2>/dev/null; then
		tools=$b
	else
		dev=${b#/dev/}
	fi
done
[ -n "$tools" ] && [ -n "$dev" ] || {
	echo "LVMM-FIO no fio disk or no device to measure (tools '$tools', device '$dev')"
	return 1
}
echo "LVMM-FIO fio from $tools, measuring /dev/$dev"
IFS=,
set -- $qds
unset IFS
for qd in "$@"; do
	echo "LVMM-FIO-BEGIN qd=$qd"
	LD_LIBRARY_PATH=/opt/lib/x86_64-linux-gnu:/opt/usr/lib/x86_64-linux-gnu:/opt/usr/lib/x86_64-linux-gnu/ceph \
		LD_PRELOAD=/opt/lib/fio-shm.so /opt/usr/bin/fio --name=randread --filename="/dev/$dev" \
		--direct=1 --ioengine=io_uring --bs=4k --rw=randread --iodepth="$qd" \
		--time_based --runtime="$rt" --ramp_time="$ramp" --norandommap --randrepeat=0 \
		--output-format=json
	echo "LVMM-FIO-END qd=$qd rc=$?"
done
return 0
