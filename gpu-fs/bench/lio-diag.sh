#!/usr/bin/env bash
# Where the lio path's time goes (docs/gpu-fs.md section 4, "lio: causes"): bench_lio's lio rows
# with the queue driver's time profile: one batch per queue pair and 8 loads in flight per
# copying thread (the driver of before), one batch per pair with GM_LIO_ILP loads, and the
# pipelined driver; softssd's backing on the disk and on a tmpfs; then the whole bench_lio.
# usage: bench/lio-diag.sh OUT_DIR BIN_DIR LVMM_DIR
#   BIN_DIR: bench_lio, bench_lio_prof, bench_lio_prof_serial, bench_lio_prof_serial_ilp8 (and
#   bench_lio_old: the bench of an earlier commit); LVMM_DIR as lio-run.sh
#   VARIANTS: the runs below to make, by name (default all)
set -u
out=$1 bin=$2 lv=$3
export LVMM=$lv/lvmm LD_LIBRARY_PATH=$lv/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$out"
W=$PWD/build/tmp/lio-diag S=/dev/shm/lio-diag
rm -rf "$W" "$S"
mkdir -p "$W" "$S"
one() { # NAME BINARY [SSD_DIR] [env...]
	local name=$1 b=$2 ssd=${3:-}
	shift 3 2>/dev/null || shift $#
	s=$(date +%s)
	env "$@" timeout ${BT:-240} "$bin/$b" "$W" $ssd >"$out/$name.csv" 2>"$out/$name.log"
	echo "$name rc=$? $(($(date +%s) - s)) s"
	grep '^prof,' "$out/$name.log" >"$out/$name-prof.csv"
	rm -rf "$S"/* "$W"/run "$W"/ssd.img
}
want() { [[ " ${VARIANTS:-all} " == *" all "* || " ${VARIANTS:-all} " == *" $1 "* ]]; }
want prof-disk-serial-ilp8 && one prof-disk-serial-ilp8 bench_lio_prof_serial_ilp8 "" BENCH_LIO_ONLY=1
want prof-disk-serial && one prof-disk-serial bench_lio_prof_serial "" BENCH_LIO_ONLY=1
want prof-disk && one prof-disk bench_lio_prof "" BENCH_LIO_ONLY=1
want prof-tmpfs-serial-ilp8 && one prof-tmpfs-serial-ilp8 bench_lio_prof_serial_ilp8 "$S" BENCH_LIO_ONLY=1
want prof-tmpfs && one prof-tmpfs bench_lio_prof "$S" BENCH_LIO_ONLY=1
want bench_lio && one bench_lio bench_lio ""
want bench_lio_old && [ -x "$bin/bench_lio_old" ] && one bench_lio_old bench_lio_old ""
head -60 "$out"/*.csv
