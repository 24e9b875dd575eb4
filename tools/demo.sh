#!/usr/bin/env bash
# make demo: boots lvmm's Linux test guest with its serial console on this terminal and says how
# it ended. Builds nothing (make demo built lvmm and the guest). usage: tools/demo.sh BUILD_DIR
set -uo pipefail

build=${1:-build}
cpus=${LVMM_DEMO_CPUS:-2}
kernel=$build/guest/vmlinux
initramfs=$build/guest/initramfs.cpio
for f in "$build/lvmm" "$kernel" "$initramfs"; do
	[ -e "$f" ] || {
		echo "demo: $f missing: run make demo (or make all guest) first" >&2
		exit 1
	}
done

# The disk is a volume on a software SSD: lvmm starts one itself (no SSD named demo0 is served),
# with its sparse backing and socket under build/demo, and stops it once the VM is gone.
demo=$build/demo
export LVMM_RUN_DIR=$demo/run LVMM_STATE_DIR=$demo/state
mkdir -p "$LVMM_RUN_DIR" "$LVMM_STATE_DIR"
echo "lvmm demo: booting Linux 6.1 ($kernel) with $cpus vCPU(s), 128 MiB and a vNVMe whose"
echo "lvmm demo: namespace is the 64 MiB volume 'demo' on the software SSD 'demo0' (isolated mode:"
echo "lvmm demo: the SSD serves the guest's I/O queues, lvmm only the admin queue); its console follows."
echo "lvmm demo: on nested-virtualization hosts (kvm_pvm) the guest kernel runs emulated and the"
echo "lvmm demo: boot takes a few minutes; no input is needed, the guest powers itself off."
echo
start=$(date +%s)
# stdin from /dev/null: unattended, and the terminal stays in its normal mode.
LVMM_STATS=1 timeout --foreground 1500 "$build/lvmm" run --kernel "$kernel" \
	--initramfs "$initramfs" --cmdline "console=ttyS0 lvmm.test=nvme-demo" --cpus "$cpus" \
	--memory 128M --vnvme "demo0:64M,vol=demo,serial=LVMMDEMO" --serial stdio </dev/null \
	2> >(grep --line-buffered -v "exits: pio" >&2)
rc=$?
echo
if [ $rc -eq 0 ]; then
	echo "lvmm demo: the guest booted, ran /init and powered off after $(($(date +%s) - start)) s."
	# the SSD is still up for a few seconds; afterwards its backing is read offline
	img=$demo/demo-volume.img
	rm -f "$img"
	"$build/lvmm" ssd vol export demo0 demo "$img" >/dev/null 2>&1 || {
		sleep 4
		"$build/lvmm" ssd vol export demo0 demo "$img" \
			--backing "$LVMM_STATE_DIR/ssd/demo0.img" >/dev/null
	}
	echo "lvmm demo: the first line of the volume, read on the host: $(head -c 80 "$img" | tr -d '\0' | head -n 1)"
else
	echo "lvmm demo: lvmm exited with status $rc after $(($(date +%s) - start)) s." >&2
fi
exit $rc
