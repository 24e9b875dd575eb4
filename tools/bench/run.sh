#!/usr/bin/env bash
# Runs every lvmm benchmark side by side on this host and regenerates the results: raw CSVs and
# host.json under docs/bench/, plots docs/bench/*.png, the tables in docs/benchmarks.md.
# usage: tools/bench/run.sh [BUILD_DIR]   (default build; lvmm, the bench guest and
# softssd-bench-client built there: make bench does it)
# Knobs (environment): BENCH_TIME (seconds per storage run, 5; scales fio runs too), ROUNDS
# (rounds of the nvme and storage benches: 7 and 2; 3 and 2 when BENCH_TIME <= 2), FIO_SECS (per
# fio run), API_N (requests per API case, 2000; 1000 short), BOOT_RUNS (boots per VM shape, 20;
# 10 short), BENCHES (which: "nvme api boot storage virtio ram net sparse upgrade snapshot";
# virtio: storage.py BENCH_ONLY=virtio, lvmm's virtio-blk and vNVMe against QEMU's virtio-blk and
# nvme on one image;
# net: netbench.py, virtio-net of lvmm and QEMU and Linux boots with devices, several minutes of
# Linux boots on a kvm_pvm host, skipped without the test guest of make guest; sparse:
# sparse.py, one read every 5 ms, native client against lvmm's isolated doorbell modes; ram:
# storage.py BENCH_ONLY=ram, every row on a tmpfs image and softssd backing, fio as reference;
# upgrade: ssd-upgrade.py, a QD1 guest's slowest I/O across `lvmm ssd upgrade` against rounds
# without; snapshot: snapbench.py, snapshot, restore and live migration of the bench guest,
# 256 MiB and 1 GiB, about 2 minutes),
# RESULTS (docs/bench), DOC (docs/benchmarks.md); storage.py lists its own.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
results=${RESULTS:-docs/bench}
doc=${DOC:-docs/benchmarks.md}
benches=${BENCHES:-nvme api boot storage virtio ram net sparse upgrade snapshot}
want() { [[ " $benches " == *" $1 "* ]]; }
for f in "$build/lvmm" "$build/bench-guest/bench-guest.elf" "$build/softssd-bench-client"; do
	[ -e "$f" ] || { echo "bench: no $f (run make first)" >&2; exit 1; }
done
for tool in fio /usr/bin/python3 curl; do
	command -v "$tool" >/dev/null ||
		{ echo "bench: $tool missing (tools/install-deps.sh)" >&2; exit 1; }
done
mkdir -p "$results"
start=$(date +%s)
# short runs (BENCH_TIME <= 2) take fewer rounds and boots where no target's ratio depends on
# them: make bench BENCH_TIME=2 in under 10 minutes on a 2-core host without net (BENCHES; its
# Linux boots add about 10 minutes on a kvm_pvm host)
short=$(awk -v t="${BENCH_TIME:-5}" 'BEGIN{print (t <= 2) ? 1 : 0}')
if [ "$short" = 1 ]; then
	nvme_rounds=${ROUNDS:-3} boot_runs=${BOOT_RUNS:-10} api_n=${API_N:-1000}
	storage_boots=${BOOT_RUNS:-5}
else
	nvme_rounds=${ROUNDS:-7} boot_runs=${BOOT_RUNS:-20} api_n=${API_N:-2000}
	storage_boots=${BOOT_RUNS:-10}
fi
part=$start
took() { echo "bench: $1 took $(($(date +%s) - part)) s"; part=$(date +%s); }

kvm=kvm
[ -d /sys/module/kvm_intel ] && kvm=kvm_intel
[ -d /sys/module/kvm_amd ] && kvm=kvm_amd
[ -d /sys/module/kvm_pvm ] && kvm="kvm_pvm (nested, software)"
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)
load=$(cut -d' ' -f1-3 /proc/loadavg)
host="$cpu, $(nproc) CPUs, $mem, Linux $(uname -r), $kvm, load average $load at start"
echo "bench: $host"

if want nvme; then
	echo "bench: exit cost and vNVMe QD1 (lvmm bench guest vs fio on the same image)"
	/usr/bin/python3 "$here/nvme-qd1.py" "$build" "$results" "$nvme_rounds" \
		"${FIO_SECS:-${BENCH_TIME:-3}}"
	took nvme
fi
if want api; then
	echo "bench: REST API round trips"
	"$here/api-latency.sh" "$build" "$api_n" "$results/api-latency"
	took api
fi
if want boot; then
	echo "bench: boot to poweroff"
	/usr/bin/python3 "$here/boot.py" "$build" "$results/boot.csv" "$boot_runs"
	took boot
fi
if want storage; then
	echo "bench: storage side by side (lvmm modes, native, QEMU), N VMs on one SSD, footprint"
	BENCH_COMMAND=${BENCH_COMMAND:-make bench BENCH_TIME=${BENCH_TIME:-5}} ROUNDS=${ROUNDS:-2} \
		BOOT_RUNS=$storage_boots /usr/bin/python3 "$here/storage.py" "$build" "$results"
	/usr/bin/python3 "$here/report_storage.py" "$results" "$doc"
	took storage
fi

if want virtio; then
	echo "bench: lvmm virtio-blk and vNVMe against QEMU virtio-blk and nvme, one image"
	BENCH_ONLY=virtio ROUNDS=${ROUNDS:-2} VOL_MB=${VOL_MB:-256} \
		/usr/bin/python3 "$here/storage.py" "$build" "$results"
	/usr/bin/python3 "$here/report_storage.py" "$results" "$doc"
	took virtio
fi
if want ram; then
	echo "bench: the software's cost apart from the disk: every row on tmpfs, fio as reference"
	BENCH_ONLY=ram ROUNDS=${ROUNDS_RAM:-3} VOL_MB=${VOL_MB:-256} \
		/usr/bin/python3 "$here/storage.py" "$build" "$results"
	/usr/bin/python3 "$here/report_storage.py" "$results" "$doc"
	took ram
fi
if want net; then
	if [ -e "$build/guest/vmlinux" ] && [ -e "$build/guest/net-bench" ]; then
		echo "bench: virtio-net lvmm against QEMU, Linux boot with devices (netbench.py)"
		NET_SECS=${NET_SECS:-$([ "$short" = 1 ] && echo 3 || echo 5)} \
			/usr/bin/python3 "$here/netbench.py" "$build" "$results"
		/usr/bin/python3 "$here/report_net.py" "$results" "$doc"
		took net
	else
		echo "bench: net skipped: no $build/guest/vmlinux or net-bench (make guest)"
	fi
fi
if want sparse; then
	echo "bench: sparse I/O, native client against lvmm isolated (sparse.py)"
	/usr/bin/python3 "$here/sparse.py" "$build" "$results" "$doc"
	took sparse
fi
if want upgrade; then
	echo "bench: softssd upgrade pause at QD1 (ssd-upgrade.py)"
	/usr/bin/python3 "$here/ssd-upgrade.py" "$build" "$results" "${ROUNDS:-3}"
	took upgrade
fi
if want snapshot; then
	echo "bench: snapshot, restore and live migration (snapbench.py)"
	/usr/bin/python3 "$here/snapbench.py" "$build" "$results"
	/usr/bin/python3 "$here/report_snapshot.py" "$results" "$doc"
	took snapshot
fi

# host.json and report.py belong to the nvme, api and boot tables: only a run of all three
if want nvme && want api && want boot; then
	/usr/bin/python3 - "$results/host.json" "$host" "$(($(date +%s) - start))" <<'PY'
import json, sys, time
json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "host": sys.argv[2],
           "duration_s": int(sys.argv[3])}, open(sys.argv[1], "w"), indent=1)
PY
	/usr/bin/python3 "$here/report.py" "$results" "$doc"
fi
echo "bench: results in $results/, tables in $doc ($(($(date +%s) - start)) s in all)"
