#!/usr/bin/env bash
# Builds gpu-fs on a GPU machine, runs test-gpu, the gds probe and the benchmarks, and packs the
# logs, CSV files and plots into one tarball.  usage: bench/gpu-run.sh OUT_DIR [tests|bench|all]
set -u
out=${1:-/tmp/gpufs-out}
what=${2:-all}
r=$(mktemp -d)
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
{
	nvidia-smi -L; uname -r; nproc; df -T . /tmp
	python3 -c 'import torch, matplotlib; print("torch", torch.__version__, "matplotlib", matplotlib.__version__)'
	ls -l /dev/vd* /dev/nvme* /dev/sd* 2>&1; cat /proc/partitions
	find / -xdev \( -name cufile.h -o -name 'libcufile.so*' -o -name cufile.json \) 2>/dev/null | head
	grep -v '^\s*//' /etc/cufile.json 2>/dev/null | grep -E 'compat|posix|allow|rdma|poll' | head -30
} >"$r/env.txt" 2>&1
extra=""
[ -d .carry/check ] && extra="$extra CHECK_DIR=$PWD/.carry/check"
[ -d .carry/uring ] && extra="$extra URING_DIR=$PWD/.carry/uring"
make -k -j8 BUILD=build $extra all >"$r/build.log" 2>&1
if [ ! -x build/test_gpu ] || [ ! -x build/bench_gemini ]; then
	tail -40 "$r/build.log"
	exit 1
fi
grep -E "gds|cufile" "$r/build.log" | head -3
W=""
for d in "$PWD/build/tmp" /tmp /root /var/tmp; do
	mkdir -p "$d" && rm -f "$d/probe.gvdk" && build/gvdk create "$d/probe.gvdk" 1M >/dev/null 2>>"$r/env.txt" && W=$d && break
done
echo "work dir: $W" | tee -a "$r/env.txt"
build/gvdk inspect "$W/probe.gvdk" >>"$r/env.txt" 2>&1
if [ "$what" != bench ]; then
	GVDK=$PWD/build/gvdk GPUFS_TEST_DIR=$W build/test_gvdk >"$r/test_gvdk.log" 2>&1
	echo "test_gvdk rc=$?"; tail -3 "$r/test_gvdk.log"
	GPUFS_TEST_DIR=$W build/test_host >"$r/test_host.log" 2>&1
	echo "test_host rc=$?"; tail -1 "$r/test_host.log"
	for t in ${CASES:-bounds_and_hostile_commands rw_nvme_disk_4k rw_nvme_memory_64k rw_posix_16k \
		eviction_under_pressure sync_durability_across_processes cross_process_sharing}; do
		echo "== $t" >>"$r/test_gpu.log"
		CK_RUN_CASE=$t GPUFS_TEST_DIR=$W timeout ${TT:-40} build/test_gpu >>"$r/test_gpu.log" 2>&1
		echo "test_gpu $t rc=$?"
	done
	grep -E "Checks|:[EF]:|backend|hits" "$r/test_gpu.log" | head -40
	mkdir -p "$out" && tar czf "$out/results.tgz" -C "$r" .
fi
if [ -x build/gds_probe ]; then
	dd if=/dev/urandom of=/dev/shm/gds.bin bs=1M count=4 status=none
	(cd "$r" && timeout 60 "$OLDPWD/build/gds_probe" "$W/probe.gvdk" /dev/shm/gds.bin >gds.txt 2>&1)
	# cuFile's compat mode still asks udev for the volume's ID_FS_USAGE; this VM has no udev
	# database, so give it the entry udev would have written, and probe again
	dev=$(stat -c '%d' "$W/probe.gvdk")
	mm="$((dev >> 8)):$((dev & 255))"
	if [ ! -e "/run/udev/data/b$mm" ] && [ "${GDS_UDEV_FIX:-1}" = 1 ]; then
		mkdir -p /run/udev/data
		printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\n' "$(findmnt -n -o FSTYPE -T "$W" 2>/dev/null || echo ext4)" >"/run/udev/data/b$mm"
		echo "--- after writing /run/udev/data/b$mm" >>"$r/gds.txt"
		(cd "$r" && timeout 60 "$OLDPWD/build/gds_probe" "$W/probe.gvdk" >>gds.txt 2>&1)
	fi
	cat "$r/gds.txt"
fi
if [ "$what" != tests ]; then
	GVDK=$PWD/build/gvdk timeout ${BT:-300} bench/run.sh "$PWD/build/bench_gemini" "$W" "$r/bench" >"$r/bench.log" 2>&1
	echo "bench rc=$?"; tail -5 "$r/bench.log"
	python3 bench/plot.py "$r/bench" 2>&1 | tail -40
fi
mkdir -p "$out"
tar czf "$out/results.tgz" -C "$r" .
