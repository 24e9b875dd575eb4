#!/usr/bin/env bash
# The mapped path (issue 28 item 10) on a GPU machine, from binaries built elsewhere: the tests
# (test_gpu, every case; test_host) and the GPT-2 offload with the pinned hook against gpu-fs's
# cached, copy-engine and SM-store paths, interleaved rounds.
# usage: [STAGES="tests gpt"] bench/gpt2-direct-run.sh BUILD OUT
#   BUILD: a build folder holding gvdk, test_gpu, test_host and libgemini_torch.so
#   OUT:   where the logs and the CSV go, flat (at most 8 files)
# env: TT (s a test case, 90: each stage should fit in 10 minutes), TORCH_T (s for the offload
#      run, 540), STEPS (10), ROUNDS (3), CASES (test_gpu cases, default all), PYTHON
#      (python3), CORPUS (a text file; default .carry/corpus-dpkg-changelog.txt, else dpkg's
#      changelog, else random tokens)
set -u
if [ $# -ne 2 ]; then
	sed -n '5,11p' "$0" >&2
	exit 2
fi
b=$(cd "$1" && pwd) || exit 2
mkdir -p "$2" && out=$(cd "$2" && pwd) || exit 2
stages=${STAGES:-tests gpt}
has() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }
cd "$(dirname "$0")/.." || exit 2
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
{
	date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader
	uname -r; nproc; free -g | head -2; df -T . /tmp
	"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
	git log -1 --format='commit %H %s' 2>/dev/null
	ls -l "$b"
} >"$out/env.txt" 2>&1
for f in gvdk test_gpu test_host libgemini_torch.so; do
	[ -e "$b/$f" ] || { echo "missing $b/$f" | tee -a "$out/env.txt"; exit 1; }
done
# a work folder on a block-device file system (gvdk needs real extents)
W=""
for d in "$b/tmp" /tmp /root /var/tmp; do
	mkdir -p "$d" && rm -f "$d/probe.gvdk" && "$b/gvdk" create "$d/probe.gvdk" 1M >/dev/null 2>>"$out/env.txt" && W=$d && break
done
[ -n "$W" ] || { echo "no folder where gvdk create works" | tee -a "$out/env.txt"; exit 1; }
rm -f "$W/probe.gvdk"
echo "work dir: $W" | tee -a "$out/env.txt"
rc_all=0
if has tests; then
	: >"$out/test_gpu.log"
	pass=0 fail=0
	for t in ${CASES:-bounds_and_hostile_commands rw_nvme_disk_4k rw_nvme_memory_64k rw_posix_16k \
		eviction_under_pressure readahead_on_a_shallow_queue sync_durability_across_processes \
		cross_process_sharing writeback_failure_keeps_data full_page_writes_race_readers \
		sync_partial_grid_two_files controller_stopped_mid_run concurrent_two_processes \
		mapped_path_coherence mapped_path_disk_sync}; do
		echo "== $t" >>"$out/test_gpu.log"
		s=$(date +%s)
		CK_RUN_CASE=$t GPUFS_TEST_DIR=$W timeout "${TT:-90}" "$b/test_gpu" >>"$out/test_gpu.log" 2>&1
		rc=$?
		echo "test_gpu $t rc=$rc $(($(date +%s) - s)) s" | tee -a "$out/test_gpu.log"
		if [ $rc = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
	done
	GPUFS_TEST_DIR=$W timeout "${TT:-90}" "$b/test_host" >"$out/test_host.log" 2>&1
	rc=$?
	echo "test_host rc=$rc" | tee -a "$out/test_host.log"
	echo "test_gpu: $pass cases passed, $fail failed; test_host rc=$rc" | tee "$out/test-totals.txt"
	[ $fail = 0 ] && [ $rc = 0 ] || rc_all=1
fi
if has gpt; then
	C=${CORPUS:-}
	if [ -z "$C" ] && [ -f .carry/corpus-dpkg-changelog.txt ]; then
		C=$PWD/.carry/corpus-dpkg-changelog.txt
	elif [ -z "$C" ] && [ -f /usr/share/doc/dpkg/changelog.gz ]; then
		C=$W/corpus-dpkg-changelog.txt
		zcat /usr/share/doc/dpkg/changelog.gz >"$C"
	fi
	echo "corpus: ${C:-none (random tokens)}" | tee -a "$out/env.txt"
	timeout "${TORCH_T:-540}" "$py" bench/gpt2_offload.py "$b/libgemini_torch.so" "$b/gvdk" "$W" \
		"$out/gpt2.csv" --modes pinned,gpufs,gpufs-direct,gpufs-mapped --rounds "${ROUNDS:-3}" \
		--backend mem --ctrl-threads 4 --steps "${STEPS:-10}" --lr 6e-4 ${C:+--corpus "$C"} \
		>"$out/gpt2.log" 2>&1
	rc=$?
	echo "gpt2_offload rc=$rc" | tee -a "$out/gpt2.log"
	grep -E "^gpt2|^corpus|no mapped image|Error|error" "$out/gpt2.log" | tail -30
	rm -f "$W/activations.gvdk" "$W/tokens.gvdk"
	[ $rc = 0 ] || rc_all=1
fi
exit $rc_all
