# lvmm.test=hotplug: vNVMe functions hot-added through ACPI (acpiphp) while the guest runs, two
# rounds (the host adds a file-backed function, then an isolated one on an SSD volume). Each
# round: wait for the host's vm.add-vnvme to bring a /dev/nvmeXn1, write a line at its start,
# read it back past the page cache, then wait for vm.remove-device to take it away (acpiphp's
# eject). Then the guest stays up until the host shuts it down. Builtins only, but one fork for
# the FIFO that the waits read with a timeout (no fork per second of waiting).
busybox mkfifo /tmp/tick || return 1
exec 3<>/tmp/tick
# Waits up to $2 seconds for the test $1 to hold; 1 when it never did.
hotplug_wait() {
	n=0
	while ! eval "$1"; do
		n=$((n + 1))
		[ $n -gt "$2" ] && return 1
		# shellcheck disable=SC3045 # busybox ash reads with a timeout
		read -r -t 1 _ <&3
	done
	return 0
}
# The line of this round at the start of $dev. The node appears before the disk is live (its
# open fails with ENXIO until nvme's add_disk is through): the caller retries.
hotplug_write() {
	{ echo "$pattern" >"$dev"; } 2>/dev/null
}
# The first NVMe namespace's block device, in $dev; 1 when there is none.
hotplug_disk() {
	dev=
	for d in /dev/nvme*n1; do
		[ -b "$d" ] && dev=$d && return 0
	done
	return 1
}
echo "LVMM-HOTPLUG-READY"
for round in 1 2; do
	hotplug_wait hotplug_disk 900 || {
		echo "LVMM-HOTPLUG-FAIL round $round: no /dev/nvme*n1 appeared"
		return 1
	}
	set -- /sys/bus/pci/slots/*
	echo "LVMM-HOTPLUG-SEEN round $round slots=$# $dev"
	pattern="LVMM-HOTPLUG-PATTERN round $round written by the guest through a hot-added disk"
	hotplug_wait hotplug_write 300 || {
		echo "LVMM-HOTPLUG-FAIL round $round: write to $dev"
		return 1
	}
	echo 3 >/proc/sys/vm/drop_caches
	line=
	read -r line <"$dev"
	if [ "$line" != "$pattern" ]; then
		echo "LVMM-HOTPLUG-FAIL round $round: read back '$line'"
		return 1
	fi
	echo "LVMM-HOTPLUG-IO round $round ok"
	hotplug_wait "! hotplug_disk" 900 || {
		echo "LVMM-HOTPLUG-FAIL round $round: $dev still there"
		return 1
	}
	echo "LVMM-HOTPLUG-GONE round $round"
done
echo "LVMM-HOTPLUG-WAIT"
read -r _ <&3
return 0
