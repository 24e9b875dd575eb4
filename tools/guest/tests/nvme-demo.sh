# lvmm.test=nvme-demo (make demo): shows the vNVMe the guest sees and leaves a line at the start
# of it, counting boots. Shell builtins only; the last close of the block device writes it back.
dev=/dev/nvme0n1
[ -b $dev ] || {
	echo "nvme-demo: no $dev"
	return 1
}
read -r model </sys/class/nvme/nvme0/model || return 1
read -r serial </sys/class/nvme/nvme0/serial || return 1
read -r sectors </sys/block/nvme0n1/size || return 1
set -- /sys/block/nvme0n1/mq/*
echo "nvme-demo: /dev/nvme0n1 is '$model' serial $serial, $((sectors / 2048)) MiB, $# I/O queue(s)"
for f in /sys/class/nvme/nvme0/device/p2pmem; do
	[ -r $f/size ] && read -r sz <$f/size && read -r av <$f/available &&
		echo "nvme-demo: controller memory buffer $((sz / 1024)) KiB, $(((sz - av) / 1024)) KiB hold submission queues"
done
prev=
read -r -n 80 prev <$dev
case $prev in
"lvmm demo boot "*)
	n=${prev#lvmm demo boot }
	n=${n%%:*}
	;;
*) n=0 ;;
esac
echo "nvme-demo: the disk says: ${prev:-(nothing yet)}"
n=$((n + 1))
echo "lvmm demo boot $n: written by the guest through /dev/nvme0n1" >$dev || return 1
echo "LVMM-NVME-DEMO-OK boot=$n"
return 0
