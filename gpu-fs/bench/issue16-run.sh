#!/usr/bin/env bash
# The GPU machine's part of issue 16's close-out, with binaries built elsewhere: test_gpu and
# test_lio RUNS times each (in turn, so a hang shows in the run it happened), test_host once
# with LVMM, then bench/lio-diag.sh (STAGES=tests, diag or both); everything packed into
# OUT_DIR/results.tgz (the device tool brings back few files).
# usage: bench/issue16-run.sh OUT_DIR BIN_DIR LVMM_DIR [RUNS]
set -u
out=$1 bin=$2 lv=$3 runs=${4:-1}
r=$(mktemp -d)
W=$PWD/build/tmp
mkdir -p "$W" "$out"
pack() { tar czf "$out/results.tgz" -C "$r" .; }
{ nvidia-smi -L; uname -r; nproc; date -u; } >"$r/env.txt" 2>&1
if [[ ${STAGES:-both} != diag ]]; then
	for i in $(seq 1 "$runs"); do
		s=$(date +%s)
		GPUFS_TEST_DIR=$W GVDK=$bin/gvdk timeout ${GT:-400} "$bin/test_gpu" >"$r/test_gpu-$i.log" 2>&1
		echo "test_gpu run $i rc=$? $(($(date +%s) - s)) s: $(grep -E '^[0-9]+%' "$r/test_gpu-$i.log")"
		grep -E ':[EF]:' "$r/test_gpu-$i.log" | head -5
		s=$(date +%s)
		GPUFS_TEST_DIR=$W LVMM=$lv/lvmm LD_LIBRARY_PATH=$lv/lib timeout ${TT:-150} "$bin/test_lio" >"$r/test_lio-$i.log" 2>&1
		echo "test_lio run $i rc=$? $(($(date +%s) - s)) s: $(grep -E '^[0-9]+%' "$r/test_lio-$i.log")"
		grep -E ':[EF]:' "$r/test_lio-$i.log" | head -5
		pack
	done
	GPUFS_TEST_DIR=$W LVMM=$lv/lvmm LD_LIBRARY_PATH=$lv/lib timeout 120 "$bin/test_host" >"$r/test_host.log" 2>&1
	echo "test_host rc=$?: $(grep -E '^[0-9]+%' "$r/test_host.log")"
	grep -E ':[EF]:' "$r/test_host.log" | head -5
	pack
fi
if [[ ${STAGES:-both} != tests ]]; then
	bench/lio-diag.sh "$r/diag" "$bin" "$lv" 2>&1 | grep -v '^==>' | grep -v '^$'
	pack
fi
