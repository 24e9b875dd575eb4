#!/usr/bin/env bash
# Builds gpu-fs on a GPU machine (or takes binaries built elsewhere), runs test-gpu, the gds
# probe, the benchmarks, the hit-path ablation and the PyTorch offload workload, and packs the
# logs, CSV files and plots into one tarball.
# usage: bench/gpu-run.sh OUT_DIR [STAGE...]   stages: tests gds bench ablate torch (default: all)
# BIN=DIR: prebuilt binaries (gvdk, test_gpu, bench_gemini, libgemini_torch.so; optional
# bench_gemini_noreconv) used when they start here; BT: bench time limit (s); QUICK=1: fewer points
set -u
out=${1:-/tmp/gpufs-out}
shift
stages=${*:-tests gds bench ablate torch}
has() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }
r=$(mktemp -d)
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
pack() { mkdir -p "$out" && tar czf "$out/results.tgz" -C "$r" .; }
{
	nvidia-smi -L; uname -r; nproc; df -T . /tmp
	python3 -c 'import torch, matplotlib; print("torch", torch.__version__, "matplotlib", matplotlib.__version__)'
	command -v ninja g++ ncu; ls -l /dev/vd* /dev/nvme* /dev/sd* 2>&1; cat /proc/partitions
	find / -xdev \( -name cufile.h -o -name 'libcufile.so*' -o -name cufile.json \) 2>/dev/null | head
	grep -v '^\s*//' /etc/cufile.json 2>/dev/null | grep -E 'compat|posix|allow|rdma|poll' | head -30
} >"$r/env.txt" 2>&1
b=$PWD/build
if [ -n "${BIN:-}" ] && [ -x "$BIN/bench_gemini" ] && { "$BIN/bench_gemini" >/dev/null 2>&1; [ $? = 2 ]; }; then
	b=$BIN
	echo "using prebuilt binaries in $b"
else
	extra=""
	[ -d .carry/check ] && extra="$extra CHECK_DIR=$PWD/.carry/check"
	[ -d .carry/uring ] && extra="$extra URING_DIR=$PWD/.carry/uring"
	make -k -j16 BUILD=build $extra all >"$r/build.log" 2>&1
	grep -E "gds|cufile" "$r/build.log" | head -3
fi
if [ ! -x "$b/test_gpu" ] || [ ! -x "$b/bench_gemini" ]; then
	tail -40 "$r/build.log"
	pack
	exit 1
fi
W=""
for d in "$PWD/build/tmp" /tmp /root /var/tmp; do
	mkdir -p "$d" && rm -f "$d/probe.gvdk" && "$b/gvdk" create "$d/probe.gvdk" 1M >/dev/null 2>>"$r/env.txt" && W=$d && break
done
echo "work dir: $W" | tee -a "$r/env.txt"
"$b/gvdk" inspect "$W/probe.gvdk" >>"$r/env.txt" 2>&1
# Test cases of one run (exit status $1, its output in $2) into the totals: Check's summary gives
# cases and failures, "SKIP: " lines skipped cases; a run that fails (a timeout) without a failed
# case is one failed case, as tests/run.sh counts.
t_pass=0 t_fail=0 t_skip=0
tally() {
	local c f k
	read -r c f < <(awk '/%: Checks: / { for (i = 1; i <= NF; i++) {
		if ($i == "Checks:") c += $(i + 1); if ($i == "Failures:" || $i == "Errors:") f += $(i + 1) }
		s = 1 } END { print (s ? c : 0), f + 0 }' "$2")
	k=$(grep -c '^SKIP: ' "$2")
	if [ "$1" -ne 0 ] && [ "$f" -eq 0 ]; then c=$((c + 1)); f=1; fi
	[ "$k" -gt $((c - f)) ] && k=$((c - f))
	t_pass=$((t_pass + c - f - k)); t_fail=$((t_fail + f)); t_skip=$((t_skip + k))
}
if has tests; then
	if [ -x "$b/test_gvdk" ]; then
		GVDK=$b/gvdk GPUFS_TEST_DIR=$W "$b/test_gvdk" >"$r/test_gvdk.log" 2>&1
		rc=$?
		echo "test_gvdk rc=$rc"; tail -1 "$r/test_gvdk.log"
		tally $rc "$r/test_gvdk.log"
	fi
	for t in ${CASES:-bounds_and_hostile_commands rw_nvme_disk_4k rw_nvme_memory_64k rw_posix_16k \
		eviction_under_pressure readahead_on_a_shallow_queue sync_durability_across_processes \
		cross_process_sharing writeback_failure_keeps_data full_page_writes_race_readers \
		sync_partial_grid_two_files controller_stopped_mid_run concurrent_two_processes}; do
		echo "== $t" >>"$r/test_gpu.log"
		s=$(date +%s)
		CK_RUN_CASE=$t GPUFS_TEST_DIR=$W timeout ${TT:-60} "$b/test_gpu" >"$r/case.log" 2>&1
		rc=$?
		cat "$r/case.log" >>"$r/test_gpu.log"
		tally $rc "$r/case.log"
		rm -f "$r/case.log"
		echo "test_gpu $t rc=$rc $(($(date +%s) - s)) s"
	done
	grep -E "Checks|:[EF]:|^SKIP: |backend|hits" "$r/test_gpu.log" | head -40
	echo "$t_pass passed, $t_fail failed, $t_skip skipped" | tee "$r/test-totals.txt"
	pack
fi
if has gds && [ -x "$b/gds_probe" ]; then
	dd if=/dev/urandom of=/dev/shm/gds.bin bs=1M count=4 status=none
	(cd "$r" && timeout 60 "$b/gds_probe" "$W/probe.gvdk" /dev/shm/gds.bin >gds.txt 2>&1)
	# cuFile's compat mode still asks udev for the volume's ID_FS_USAGE; this VM has no udev
	# database, so give it the entry udev would have written, and probe again
	dev=$(stat -c '%d' "$W/probe.gvdk")
	mm="$((dev >> 8)):$((dev & 255))"
	if [ ! -e "/run/udev/data/b$mm" ] && [ "${GDS_UDEV_FIX:-1}" = 1 ]; then
		mkdir -p /run/udev/data
		printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\n' "$(findmnt -n -o FSTYPE -T "$W" 2>/dev/null || echo ext4)" >"/run/udev/data/b$mm"
		echo "--- after writing /run/udev/data/b$mm" >>"$r/gds.txt"
		(cd "$r" && timeout 60 "$b/gds_probe" "$W/probe.gvdk" >>gds.txt 2>&1)
	fi
	tail -3 "$r/gds.txt"
fi
mkdir -p "$r/bench"
if has ablate; then
	GVDK=$b/gvdk bench/run.sh "$b/bench_gemini" "$W" "$r/bench" prepare >>"$r/bench.log" 2>&1
	a=$r/bench/ablate.csv
	echo "kind,page_size,read_len,warps,stage,us_per_op,mops,diverged,build" >"$a"
	for bin in bench_gemini bench_gemini_noreconv; do
		[ -x "$b/$bin" ] || continue
		for p in ${ABLATE_PAGES:-4096 65536}; do
			timeout 120 "$b/$bin" ablate "$W/bench.gvdk" $p ${ABLATE_WARPS:-1,4,64,1024,8192} 2>>"$r/bench.log" |
				sed "s/\$/,$bin/" >>"$a"
		done
	done
	cat "$a"
	pack
fi
if has bench; then
	GVDK=$b/gvdk timeout ${BT:-300} bench/run.sh "$b/bench_gemini" "$W" "$r/bench" ${BENCH_PARTS:-} >>"$r/bench.log" 2>&1
	echo "bench rc=$?"; tail -5 "$r/bench.log"
	pack
fi
if has torch; then
	timeout ${TORCH_T:-300} python3 bench/gpt2_offload.py "$b/libgemini_torch.so" "$b/gvdk" "$W" \
		"$r/bench/gpt2.csv" ${TORCH_ARGS:-} >"$r/torch.log" 2>&1
	echo "torch rc=$?"
	# TORCH2: more configurations, ';' between them, e.g. "--modes gpufs --ctrl-threads 4"
	IFS=';' read -r -a more <<<"${TORCH2:-}"
	for cfg in "${more[@]}"; do
		[ -n "${cfg// /}" ] || continue
		timeout ${TORCH_T:-300} python3 bench/gpt2_offload.py "$b/libgemini_torch.so" "$b/gvdk" "$W" \
			"$r/bench/gpt2.csv" $cfg >>"$r/torch.log" 2>&1
		echo "torch ($cfg) rc=$?"
	done
	grep -E "^gpt2|^corpus|Error|error" "$r/torch.log" | tail -24
fi
cp bench/results/ablate-lockpath.csv "$r/bench/" 2>/dev/null
python3 bench/plot.py "$r/bench" 2>&1 | tail -40
cp "$r"/bench/*.png "$out/" 2>/dev/null
pack
