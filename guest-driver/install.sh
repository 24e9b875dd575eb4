#!/bin/sh
# Installs the LightIOV passthrough frontend in a running Linux guest (Debian 12 and the like):
# builds lightiov_nvme.ko for the running kernel (or takes a prebuilt one that matches it), loads
# it, moves every passthrough-mode vNVMe function from nvme to it, and makes that survive reboots
# (modules-load.d, a udev rule and, where the root file system lives on a vNVMe, the initramfs).
#
# usage: install.sh [--ko FILE] [--no-persist]    install (as root, inside the guest)
#        install.sh --uninstall                   undo all of it; nvme takes the functions back
#        install.sh --status                      what is installed and who drives each vNVMe
set -eu

here=$(cd "$(dirname "$0")" && pwd)
# LIO_ROOT: a staging root for the files written (packaging and tests): devices, modules loaded
# and the initramfs are left alone; LIO_KVER then names the kernel the files are for.
root=${LIO_ROOT:-}
kver=$(uname -r)
[ -z "$root" ] || kver=${LIO_KVER:-$kver}
moddir=$root/lib/modules/$kver/extra
ko_dst=$moddir/lightiov_nvme.ko
helper=$root/usr/local/sbin/lightiov-nvme-bind
rule=$root/etc/udev/rules.d/60-lightiov-nvme.rules
loadconf=$root/etc/modules-load.d/lightiov_nvme.conf
hook=$root/etc/initramfs-tools/hooks/lightiov_nvme
sysfs=/sys/bus/pci

die() {
	echo "install.sh: $*" >&2
	exit 1
}
say() { echo "install.sh: $*"; }

# The LightIOV mode of PCI function $1 (0 emulate, 1 passthrough, 2 isolated), nothing without
# the capability: walks the capability list in config space for the vendor capability "LIOV".
lio_mode() {
	cfg=$sysfs/devices/$1/config
	[ -r "$cfg" ] || return 0
	bytes=$(od -An -v -tu1 -N256 "$cfg" | tr -s ' \n' ' ')
	# shellcheck disable=SC2086
	set -- $bytes
	[ $# -ge 64 ] || return 0
	byte() { eval "echo \${$(($1 + 1))}"; }
	ptr=$(($(byte 52) & 252))
	n=0
	while [ "$ptr" -ge 64 ] && [ "$ptr" -le 208 ] && [ $n -lt 32 ]; do
		if [ "$(byte "$ptr")" -eq 9 ] && [ "$(byte $((ptr + 4)))" -eq 86 ] &&
			[ "$(byte $((ptr + 5)))" -eq 79 ] && [ "$(byte $((ptr + 6)))" -eq 73 ] &&
			[ "$(byte $((ptr + 7)))" -eq 76 ]; then
			byte $((ptr + 8))
			return 0
		fi
		ptr=$(($(byte $((ptr + 1))) & 252))
		n=$((n + 1))
	done
}

# PCI functions that are passthrough-mode vNVMe functions.
lio_functions() {
	for d in "$sysfs"/devices/*; do
		[ -e "$d/vendor" ] || continue
		if [ "$(cat "$d/vendor")" != 0x1b36 ] || [ "$(cat "$d/device")" != 0x0110 ]; then
			continue
		fi
		bdf=${d##*/}
		[ "$(lio_mode "$bdf")" = 1 ] && echo "$bdf"
	done
	return 0
}

driver_of() {
	if [ -e "$sysfs/devices/$1/driver" ]; then
		basename "$(readlink "$sysfs/devices/$1/driver")"
	fi
}

# Whether a block device of function $1 is mounted, in use as swap or held by another device.
busy() {
	for b in "$sysfs"/devices/"$1"/nvme/nvme*/nvme*n* "$sysfs"/devices/"$1"/block/*; do
		[ -e "$b" ] || continue
		name=${b##*/}
		if grep -q "^/dev/$name" /proc/mounts /proc/swaps 2>/dev/null ||
			[ -n "$(ls "$b/holders" 2>/dev/null)" ]; then
			return 0
		fi
	done
	return 1
}

# Moves function $1 to driver $2 ("" for whatever matches: nvme), unless it is in use.
rebind() {
	bdf=$1 want=$2 cur=$(driver_of "$1")
	[ "$cur" = "${want:-nvme}" ] && return 0
	if [ -n "$cur" ] && busy "$bdf"; then
		say "$bdf: in use on $cur (mounted); it changes driver at the next boot"
		return 0
	fi
	echo "$want" >"$sysfs/devices/$bdf/driver_override"
	[ -z "$cur" ] || echo "$bdf" >"$sysfs/drivers/$cur/unbind"
	echo "$bdf" >"$sysfs/drivers_probe" || true
	say "$bdf: $(driver_of "$bdf" || true) (was ${cur:-unbound})"
}

build_module() {
	kdir=/lib/modules/$kver/build
	if [ ! -e "$kdir/Makefile" ]; then
		command -v apt-get >/dev/null ||
			die "no kernel headers in $kdir: install the headers of $kver"
		say "installing linux-headers-$kver"
		apt-get install -y "linux-headers-$kver" >/dev/null ||
			die "apt-get install linux-headers-$kver failed"
	fi
	work=$(mktemp -d)
	cp "$here/module/lightiov_nvme.c" "$here/module/Kbuild" "$here/module/Makefile" "$work/"
	if ! make -C "$work" KDIR="$kdir" >"$work/build.log" 2>&1; then
		tail -n 20 "$work/build.log" >&2
		die "building lightiov_nvme.ko against $kdir failed"
	fi
	ko=$work/lightiov_nvme.ko
}

write_persistence() {
	mkdir -p "$(dirname "$helper")" "$(dirname "$rule")" "$(dirname "$loadconf")"
	cat >"$helper" <<'EOF'
#!/bin/sh
# lightiov-nvme-bind BDF: moves a passthrough-mode vNVMe function to lightiov_nvme (udev RUN).
d=/sys/bus/pci/devices/$1
cfg=$d/config
set -- $(od -An -v -tu1 -N256 "$cfg" | tr -s ' \n' ' ')
byte() { eval "echo \${$(($1 + 1))}"; }
ptr=$(($(byte 52) & 252)); n=0
while [ "$ptr" -ge 64 ] && [ "$ptr" -le 208 ] && [ $n -lt 32 ]; do
	if [ "$(byte "$ptr")" -eq 9 ] && [ "$(byte $((ptr + 4)))" -eq 86 ] &&
		[ "$(byte $((ptr + 7)))" -eq 76 ]; then
		[ "$(byte $((ptr + 8)))" -eq 1 ] || exit 0
		modprobe lightiov_nvme 2>/dev/null
		echo lightiov_nvme >"$d/driver_override"
		[ -e "$d/driver" ] && echo "${d##*/}" >"$d/driver/unbind"
		echo "${d##*/}" >/sys/bus/pci/drivers_probe
		exit 0
	fi
	ptr=$(($(byte $((ptr + 1))) & 252)); n=$((n + 1))
done
EOF
	chmod 755 "$helper"
	cat >"$rule" <<'EOF'
# LightIOV passthrough vNVMe functions go to lightiov_nvme (guest-driver/install.sh)
ACTION=="add", SUBSYSTEM=="pci", ATTR{vendor}=="0x1b36", ATTR{device}=="0x0110", RUN+="/usr/local/sbin/lightiov-nvme-bind %k"
EOF
	echo lightiov_nvme >"$loadconf"
	written="$loadconf, $rule, $helper"
	# A root file system on a vNVMe is mounted from the initramfs: the module, the rule and the
	# helper go there too (initramfs-tools, Debian's default).
	if [ -d "$root/etc/initramfs-tools" ]; then
		mkdir -p "$(dirname "$hook")"
		cat >"$hook" <<'EOF'
#!/bin/sh
# lightiov_nvme in the initramfs (guest-driver/install.sh)
case $1 in prereqs) exit 0 ;; esac
. /usr/share/initramfs-tools/hook-functions
manual_add_modules lightiov_nvme
copy_exec /usr/local/sbin/lightiov-nvme-bind /usr/local/sbin
mkdir -p "$DESTDIR/etc/udev/rules.d"
cp /etc/udev/rules.d/60-lightiov-nvme.rules "$DESTDIR/etc/udev/rules.d/"
EOF
		chmod 755 "$hook"
		written="$written, $hook"
		[ -z "$root" ] && command -v update-initramfs >/dev/null &&
			update-initramfs -u -k "$kver" >/dev/null
	fi
	say "persisted: $written"
}

do_install() {
	ko=$1 persist=$2
	if [ -n "$ko" ]; then
		[ -r "$ko" ] || die "$ko: not readable"
		vm=$(tr '\000' '\n' <"$ko" | sed -n 's/^vermagic=//p' | head -n 1 | cut -d' ' -f1)
		[ "$vm" = "$kver" ] || die "$ko is for kernel '${vm:-unknown}', this one runs $kver"
	elif [ -r "$here/prebuilt/$kver/lightiov_nvme.ko" ]; then
		ko=$here/prebuilt/$kver/lightiov_nvme.ko
	else
		build_module
	fi
	mkdir -p "$moddir"
	install -m 644 "$ko" "$ko_dst"
	[ -n "$root" ] || depmod -a "$kver"
	say "installed $ko_dst"
	[ "$persist" = 0 ] || write_persistence
	[ -z "$root" ] || return 0
	modprobe lightiov_nvme
	for bdf in $(lio_functions); do
		rebind "$bdf" lightiov_nvme
	done
}

do_uninstall() {
	if [ -z "$root" ]; then
		for bdf in $(lio_functions); do
			rebind "$bdf" ""
		done
		if grep -q '^lightiov_nvme ' /proc/modules; then
			rmmod lightiov_nvme || say "lightiov_nvme still in use: it goes at the next boot"
		fi
	fi
	had_hook=0
	[ -e "$hook" ] && had_hook=1
	rm -f "$helper" "$rule" "$loadconf" "$hook" "$ko_dst"
	if [ -z "$root" ]; then
		depmod -a "$kver"
		[ $had_hook = 0 ] || ! command -v update-initramfs >/dev/null ||
			update-initramfs -u -k "$kver" >/dev/null
	fi
	say "uninstalled"
}

do_status() {
	if [ -e "$ko_dst" ]; then say "module: $ko_dst"; else say "module: not installed"; fi
	if [ -e "$rule" ]; then say "persistent: $rule"; else say "persistent: no"; fi
	for bdf in $(lio_functions); do
		drv=$(driver_of "$bdf")
		say "$bdf: passthrough vNVMe on ${drv:-no driver}"
	done
}

ko="" persist=1 action=install
while [ $# -gt 0 ]; do
	case $1 in
	--ko)
		[ $# -ge 2 ] || die "--ko needs a file"
		ko=$2
		shift
		;;
	--no-persist) persist=0 ;;
	--uninstall) action=uninstall ;;
	--status) action=status ;;
	-h | --help)
		sed -n '2,10p' "$0"
		exit 0
		;;
	*) die "unknown option '$1' (--help)" ;;
	esac
	shift
done
[ -n "$root" ] || [ "$(id -u)" = 0 ] || die "run as root"
case $action in
install) do_install "$ko" "$persist" ;;
uninstall) do_uninstall ;;
status) do_status ;;
esac
