# lvmm.test=kata: what a Kata sandbox's kernel sees of the devices its default VmConfig asks for.
# The hwrng core names the virtio-rng device it reads; 64 bytes from /dev/hwrng (lvmm's rng.src);
# the PCI root buses, one per platform.num_pci_segments, and the PCI functions; the network
# interfaces (the one vm.add-net gave it); the shared file system. Sourced by /init (forks for
# od, mkdir and mount); then the guest stays up until the host shuts it down, as a sandbox does.
rng=none
read -r rng </sys/class/misc/hw_random/rng_current
echo "LVMM-KATA-HWRNG-DEV $rng"
hex=$(busybox od -An -v -tx1 -N64 /dev/hwrng)
# shellcheck disable=SC2086
set -- $hex
echo "LVMM-KATA-HWRNG n=$# $*"
buses=
for b in /sys/class/pci_bus/*; do buses="$buses ${b##*/}"; done
devs=
for d in /sys/bus/pci/devices/*; do devs="$devs ${d##*/}"; done
echo "LVMM-KATA-PCI buses=${buses# } devices=${devs# }"
vs=no
[ -e /sys/class/misc/vsock ] && vs=yes
echo "LVMM-KATA-VSOCK misc=$vs"
nets=
for n in /sys/class/net/*; do nets="$nets ${n##*/}"; done
echo "LVMM-KATA-NET${nets}"
# the shared file system Kata's fs asks for (virtiofsd on the host): mounted, a file read
fs=none
busybox mkdir -p /run/kata-shared
if busybox mount -t virtiofs kataShared /run/kata-shared; then
	fs=empty
	read -r fs </run/kata-shared/kata-hello.txt
fi
echo "LVMM-KATA-FS $fs"
echo "LVMM-KATA-WAIT"
busybox sleep 100000
return 0
