#!/usr/bin/env bash
# make test's smoke run of the storage benchmark harness (seconds, not a benchmark): every row
# kind once at a tiny size into a temp dir, the report into a copy of docs/benchmarks.md, the
# snapshot and migration harness at 64 MiB (snapbench.py SMOKE=1), and the
# virtio-net harness on the host (netbench.py NET_ONLY=loop, no VM); fails when a row, a table
# or a plot is missing. Appends "bench-smoke PASSED FAILED 0" to
# $LVMM_TEST_TOTALS (tests/run-suites.sh).
set -uo pipefail
build=${1:-build}
if ! "$(dirname "$0")/../kvm-usable.sh"; then
	# every row but native boots a VM: one skipped case, not a pass (ci/test.sh refuses the host)
	echo "SKIP: bench-smoke: /dev/kvm not usable here (its rows boot VMs)"
	[ -n "${LVMM_TEST_TOTALS:-}" ] && echo "bench-smoke 0 0 1" >>"$LVMM_TEST_TOTALS"
	exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /var/tmp/lvmm-bench-smoke.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
pass=0 fail=0
check() {
	if eval "$2"; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		echo "bench-smoke: FAIL $1" >&2
	fi
}
cp "$here/../../docs/benchmarks.md" "$tmp/doc.md"
SMOKE=1 ROUNDS=1 BENCH_TIME=0.3 VOL_MB=16 SCALE=2 BOOT_RUNS=1 DIR=$tmp \
	/usr/bin/python3 "$here/storage.py" "$build" "$tmp/res" >"$tmp/log" 2>&1
check "storage.py ran (log: $(tail -5 "$tmp/log"))" '[ -s "$tmp/res/storage-host.json" ]'
systems=("native" "lvmm passthrough" "lvmm isolated" "lvmm emulate" "lvmm virtio-blk")
command -v qemu-system-x86_64 >/dev/null && systems+=("QEMU nvme" "QEMU virtio-blk")
for s in "${systems[@]}"; do
	check "$s: both workloads measured" \
		'[ "$(grep -c "^1,$s,rand[a-z]*,[0-9]*,[0-9]*,1," "$tmp/res/storage.csv" 2>/dev/null)" = 2 ]'
done
check "scale: both VMs reported" 'grep -q "^2,isolated,halt,2," "$tmp/res/scale.csv" 2>/dev/null'
check "boot: lvmm powered off" 'grep -q "^1,lvmm,.*,1,*$" "$tmp/res/boot-footprint.csv" 2>/dev/null'
/usr/bin/python3 "$here/report_storage.py" "$tmp/res" "$tmp/doc.md" >>"$tmp/log" 2>&1
for t in storage ratios scale boot-footprint; do
	check "table $t in the report" 'grep -q "<!-- /bench:$t -->" "$tmp/doc.md"'
done
check "plots drawn" '[ -s "$tmp/res/storage.png" ] && [ -s "$tmp/res/scale.png" ]'
# the RAM rows (BENCH_ONLY=ram): fio's reference and lvmm's isolated row on a tmpfs image
skip=0
shm=$(stat -f -c %T /dev/shm 2>/dev/null || true)
if [ "$shm" = tmpfs ] && command -v fio >/dev/null; then
	SMOKE=1 BENCH_ONLY=ram ROUNDS=1 BENCH_TIME=0.3 VOL_MB=16 DIR=/dev/shm \
		/usr/bin/python3 "$here/storage.py" "$build" "$tmp/res" >>"$tmp/log" 2>&1
	for s in "fio io_uring" "lvmm isolated"; do
		check "ram: $s measured" \
			'[ "$(grep -c "^1,$s,rand[a-z]*,[0-9]*,1,1," "$tmp/res/storage-ram.csv" 2>/dev/null)" = 2 ]'
	done
	/usr/bin/python3 "$here/report_storage.py" "$tmp/res" "$tmp/doc.md" >>"$tmp/log" 2>&1
	check "ram table in the report" 'grep -q "<!-- /bench:storage-ram -->" "$tmp/doc.md"'
else
	echo "bench-smoke: SKIP ram rows: /dev/shm is ${shm:-absent}, not tmpfs, or fio is missing"
	skip=1
fi
# snapbench.py at 64 MiB: one snapshot and restore, the four migrations, the report and plot
SMOKE=1 timeout 120 /usr/bin/python3 "$here/snapbench.py" "$build" "$tmp/res" >>"$tmp/log" 2>&1
check "snapshot: saved, restored (mapped and copied) and alive again" \
	'[ "$(grep -cE "^1,snapshot,64,32,(OnDemand|Copy),[0-9.]+,[0-9.]+,64.0,[0-9]+,[0-9.]+,[0-9.]+" "$tmp/res/snapshot-smoke.csv" 2>/dev/null)" = 2 ]'
check "snapshot: the four migrations measured" \
	'[ "$(grep -c "^1,migration,64,32," "$tmp/res/snapshot-smoke-migration.csv" 2>/dev/null)" = 4 ]'
/usr/bin/python3 "$here/report_snapshot.py" "$tmp/res" "$tmp/doc.md" snapshot-smoke >>"$tmp/log" 2>&1
check "snapshot tables and plot" \
	'grep -q "<!-- /bench:migration -->" "$tmp/doc.md" && [ -s "$tmp/res/snapshot-smoke.png" ]'
net_measured() { # one row, ok, each phase's rate above 0
	/usr/bin/python3 - "$1" <<'PY' 2>/dev/null
import csv, sys
r = list(csv.DictReader(open(sys.argv[1])))
sys.exit(not (len(r) == 1 and r[0]["ok"] == "1" and
              all(float(r[0][k] or 0) > 0 for k in ("tx_mib_s", "rx_mib_s", "rr_per_s"))))
PY
}
# netbench.py's servers, net-bench and report_net.py on the host (NET_ONLY=loop: no VM, a second)
if [ "$(id -u)" != 0 ]; then
	echo "bench-smoke: net harness skipped: its network namespace needs root"
elif [ ! -x "$build/guest/net-bench" ]; then
	echo "bench-smoke: net harness skipped: no $build/guest/net-bench"
else
	NET_ONLY=loop NET_SECS=0.2 NET_ROUNDS=1 timeout 60 \
		/usr/bin/python3 "$here/netbench.py" "$build" "$tmp/net" >>"$tmp/log" 2>&1
	check "net harness: the three phases measured" 'net_measured "$tmp/net/net.csv"'
	/usr/bin/python3 "$here/report_net.py" "$tmp/net" "$tmp/doc.md" >>"$tmp/log" 2>&1
	check "net table and plot" \
		'grep -q "<!-- /bench:net -->" "$tmp/doc.md" && [ -s "$tmp/net/net.png" ]'
fi
[ $fail -eq 0 ] || cat "$tmp/log" >&2
echo "bench-smoke: $pass passed, $fail failed, $skip skipped"
[ -n "${LVMM_TEST_TOTALS:-}" ] && echo "bench-smoke $pass $fail $skip" >>"$LVMM_TEST_TOTALS"
[ $fail -eq 0 ]
