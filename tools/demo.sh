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

disk=$build/demo/nvme.img
mkdir -p "$build/demo"
echo "lvmm demo: booting Linux 6.1 ($kernel) with $cpus vCPU(s), 128 MiB and a vNVMe backed by"
echo "lvmm demo: $disk (64 MiB, created on the first run); its console follows."
echo "lvmm demo: on nested-virtualization hosts (kvm_pvm) the guest kernel runs emulated and the"
echo "lvmm demo: boot takes a few minutes; no input is needed, the guest powers itself off."
echo
start=$(date +%s)
# stdin from /dev/null: unattended, and the terminal stays in its normal mode.
timeout --foreground 1500 "$build/lvmm" run --kernel "$kernel" --initramfs "$initramfs" \
	--cmdline "console=ttyS0 lvmm.test=nvme-demo" --cpus "$cpus" --memory 128M \
	--vnvme "file=$disk,size=64M,serial=LVMMDEMO" --serial stdio </dev/null
rc=$?
echo
if [ $rc -eq 0 ]; then
	echo "lvmm demo: the guest booted, ran /init and powered off after $(($(date +%s) - start)) s."
	echo "lvmm demo: the first line of $disk, read on the host: $(head -c 80 "$disk" | tr -d '\0' | head -n 1)"
else
	echo "lvmm demo: lvmm exited with status $rc after $(($(date +%s) - start)) s." >&2
fi
exit $rc
