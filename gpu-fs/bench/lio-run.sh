#!/usr/bin/env bash
# The lio backend on a GPU machine: test_lio RUNS times, then bench_lio, each against a softssd
# of its own; logs and CSV packed into OUT_DIR/lio-results.tgz.
# usage: bench/lio-run.sh OUT_DIR BIN_DIR LVMM_DIR [RUNS]
#   BIN_DIR: test_lio, bench_lio, gvdk (built elsewhere: `make BUILD=... CHECK_DIR=... URING_DIR=...
#   ARCH=-arch=sm_90`; without ARCH, a host with no GPU builds PTX only)
#   LVMM_DIR: the lvmm binary and, under lib/, the shared libraries it needs that the machine lacks
# env: SSD_DIR=DIR puts bench_lio's softssd backing there (a tmpfs such as /dev/shm takes the
#   disk out of the lio path); LIO_FX_WORKERS=N gives softssd N workers (default: its own, 2);
#   TT, BT: time limits of test_lio and bench_lio in seconds; BENCH=0: test_lio only
set -u
out=$1 bin=$2 lv=$3 runs=${4:-3}
r=$(mktemp -d)
export LVMM=$lv/lvmm LD_LIBRARY_PATH=$lv/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
pack() { mkdir -p "$out" && tar czf "$out/lio-results.tgz" -C "$r" .; }
{
	nvidia-smi -L; uname -a; nproc; df -T /tmp "$PWD"
	"$LVMM" --version 2>&1 | head -1
} >"$r/env.txt" 2>&1
W=""
for d in "$PWD/build/tmp" /tmp /root /var/tmp; do
	mkdir -p "$d" && rm -f "$d/probe.gvdk" && "$bin/gvdk" create "$d/probe.gvdk" 1M >/dev/null 2>>"$r/env.txt" && W=$d && break
done
echo "work dir: $W" | tee -a "$r/env.txt"
for i in $(seq 1 "$runs"); do
	s=$(date +%s)
	GPUFS_TEST_DIR=$W LIO_KEEP_LOG=${LIO_KEEP_LOG:-} timeout ${TT:-300} "$bin/test_lio" >"$r/test_lio-$i.log" 2>&1
	rc=$?
	echo "test_lio run $i rc=$rc $(($(date +%s) - s)) s: $(grep -E 'Checks' "$r/test_lio-$i.log")"
	[ "$rc" = 0 ] || tail -30 "$r/test_lio-$i.log"
	pack
done
if [ "${BENCH:-1}" = 1 ]; then
	mkdir -p "$W/lio-bench"
	s=$(date +%s)
	echo "bench_lio: softssd backing in ${SSD_DIR:-$W/lio-bench}, workers ${LIO_FX_WORKERS:-default}" | tee -a "$r/env.txt"
	timeout ${BT:-300} "$bin/bench_lio" "$W/lio-bench" ${SSD_DIR:+"$SSD_DIR"} >"$r/bench_lio.csv" 2>"$r/bench_lio.log"
	echo "bench_lio rc=$? $(($(date +%s) - s)) s"
	cat "$r/bench_lio.csv"
	tail -12 "$r/bench_lio.log"
	cp "$W/lio-bench/softssd.log" "$r/bench-softssd.log" 2>/dev/null
fi
pack
