#!/usr/bin/env bash
# Runs the gpu-fs benchmarks and writes CSV files for bench/plot.py.
# usage: bench/run.sh BENCH_BINARY WORK_DIR OUT_DIR [PART...]
#   parts: randread map copycost hit seq (default: all); prepare: only create and fill the 1 GiB file
#   GVDK names the gvdk tool; QUICK=1: fewer points
set -eu
bench=$1 work=$2 out=$3
shift 3
parts=${*:-randread map copycost hit seq}
has() { case " $parts " in *" $1 "*) return 0 ;; esac; return 1; }
mkdir -p "$work" "$out"
f=$work/bench.gvdk
if ! { [ -f "$f.filled" ] && "$GVDK" verify "$f" >/dev/null 2>&1; }; then
	rm -f "$f" "$f.filled"
	"$GVDK" create "$f" 1G
	# fill with non-zero data once (never time zeros)
	python3 - "$f" <<'PY'
import os, sys, struct
p = sys.argv[1]
with open(p, 'r+b') as fh:
    h = fh.read(512)
    off, size = struct.unpack_from('<QQ', h, 32)
    fh.seek(off)
    chunk = os.urandom(1 << 20)
    for i in range(size >> 20):
        fh.write(chunk)
    fh.flush(); os.fsync(fh.fileno())
PY
	touch "$f.filled"
fi
has prepare && exit 0
T=1,4,16,64,128,256,512,1024,2048,4096
C=1,4,16,64,128,256,512
[ "${QUICK:-0}" = 1 ] && T=1,64,128,256,512,4096 && C=1,4,128,256,512
rr=$out/randread.csv
if has randread; then
	echo "kind,backend,host_threads,threads,iops,mbps,lat_us,errors,cpu_cores,iops_per_core" >"$rr"
	# kind "nvme-mem": gemini_dev_read_direct, around the page cache; "-cached": gemini_dev_read
	# through it
	"$bench" randread "$f" nvme-mem 1 0 $T 64 >>"$rr" || true
	"$bench" randread "$f" nvme-mem 1 2 $T 64 >>"$rr" || true
	"$bench" randread "$f" nvme-mem 4 2 $T 64 >>"$rr" || true
	"$bench" randread "$f" nvme-disk 1 2 $T 16 >>"$rr" || true
	[ "${QUICK:-0}" = 1 ] || "$bench" randread "$f" nvme-mem 1 1 $T 64 >>"$rr" || true
	"$bench" randread "$f" nvme-mem 4 0 $T 64 >>"$rr" || true
	"$bench" randread "$f" nvme-disk 1 0 $T 16 >>"$rr" || true
	"$bench" randread "$f" posix-proxy 1 0 $T 32 >>"$rr" || true
	[ "${QUICK:-0}" = 1 ] || "$bench" randread "$f" gds-proxy 1 0 $T 16 >>"$rr" || true
	"$bench" cpu "$f" buffered $C 2000 >>"$rr" || true
	"$bench" cpu "$f" direct $C 500 >>"$rr" || true
	# the strongest CPU-centric baselines: batched async copies, thread count swept; cuFile
	"$bench" cpu-batched "$f" buffered 1,2,4,8,16,32,64 8192 64 >>"$rr" || true
	"$bench" cpu-batched "$f" direct 1,2,4,8,16,32,64 1024 64 >>"$rr" || true
	"$bench" cpu "$f" gds 1,4,8,16,32,64 2000 >>"$rr" || true
fi
has map && { "$bench" map "$f" >"$out/map.csv" || true; }
if has copycost; then
	echo "kind,copies,host_us_per_copy,total_us_per_copy" >"$out/copycost.csv"
	"$bench" copycost >>"$out/copycost.csv" || true
fi
hit=$out/hit.csv
if has hit; then
	echo "kind,page_size,read_len,warps,cache_gbps,raw_gbps" >"$hit"
	for p in ${HIT_PAGES:-4096 16384 65536 262144 1048576}; do
		"$bench" hit "$f" $p ${HIT_WARPS:-1,4,16,64,256,1024,4096,8192} >>"$hit" || true
	done
fi
seq=$out/seq.csv
if has seq; then
	echo "kind,backend,page_size,prefetch,warps,mbps,errors" >"$seq"
	for p in 4096 16384 65536 262144 1048576; do
		"$bench" seq "$f" nvme-mem $p 0 64 >>"$seq" || true
		"$bench" seq "$f" nvme-disk $p 0 64 >>"$seq" || true
	done
	for pf in 0 1 2 4 8; do
		"$bench" seq "$f" nvme-mem 65536 $pf 64 >>"$seq" || true
		"$bench" seq "$f" nvme-disk 65536 $pf 64 >>"$seq" || true
	done
fi
echo "bench: results in $out"
