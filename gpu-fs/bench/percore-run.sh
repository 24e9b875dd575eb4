#!/usr/bin/env bash
# 4 KiB random reads into GPU memory: gpu-fs against the strongest CPU baseline, IOPS and IOPS per
# busy host core (docs/gpu-fs.md, "IOPS per host core"), ROUNDS rounds with the rows of a round
# back to back in turn, then the ratios per round and their medians.
# usage: bench/percore-run.sh BIN_DIR WORK_DIR OUT_DIR [ROUNDS]
#   BIN_DIR holds bench_gemini and gvdk (make -C gpu-fs); WORK_DIR gets the 1 GiB file
set -eu
if [ $# -lt 3 ]; then
	sed -n '5,6p' "$0" >&2
	exit 2
fi
bin=$1 work=$2 out=$3 rounds=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work" "$out"
GVDK=$bin/gvdk "$here/run.sh" "$bin/bench_gemini" "$work" "$out" prepare
f=$work/bench.gvdk
csv=$out/percore.csv
echo "round,kind,backend,host_threads,threads,iops,mbps,lat_us,errors,cpu_cores,iops_per_core" >"$csv"
row() { "$bin/bench_gemini" "$@" | sed "s/^/$r,/" | tee -a "$csv"; }
for r in $(seq 1 "$rounds"); do
	# gemini_dev_read_direct (around the page cache), the memory namespace, 1 and 4 controller
	# threads; through the page cache (every read a miss: 64 MiB of cache for 1 GiB) with 4
	row randread "$f" nvme-mem 4 0 1024,4096 64
	row randread "$f" nvme-mem 1 0 1024,4096 64
	row randread "$f" nvme-mem 4 2 4096 64
	# the batched CPU baseline from the page cache (the file was read once by prepare and row 1)
	row cpu-batched "$f" buffered 4,8,16 8192 64
done
python3 - "$csv" <<'PY' | tee "$out/percore.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def best(r, pred, key):
    c = [x for x in rows if x['round'] == r and pred(x)]
    return max(c, key=lambda x: float(x[key])) if c else None
rounds = sorted({x['round'] for x in rows}, key=int)
base = lambda x: x['backend'] == 'posix-cpu-batched'
for name, pred in (('gpu-fs, 4 controller threads', lambda x: x['backend'] == 'nvme-mem' and x['host_threads'] == '4'),
                   ('gpu-fs, 1 controller thread', lambda x: x['backend'] == 'nvme-mem' and x['host_threads'] == '1'),
                   ('gpu-fs, 4 threads, through the cache', lambda x: x['backend'] == 'nvme-mem-cached')):
    for key, what in (('iops', 'IOPS (best row each)'), ('iops_per_core', 'IOPS per busy core (best row each)')):
        q = []
        for r in rounds:
            a, b = best(r, pred, key), best(r, base, key)
            if a and b:
                q.append(float(a[key]) / float(b[key]))
                print(f"round {r}: {name}: {what}: {float(a[key]):,.0f} ({a['threads']} threads, "
                      f"{a['cpu_cores']} cores) / baseline {float(b[key]):,.0f} ({b['threads']} threads, "
                      f"{b['cpu_cores']} cores) = {q[-1]:.2f}")
        if q:
            print(f"== {name} / batched CPU baseline, {what}: median {statistics.median(q):.2f} "
                  f"({', '.join('%.2f' % v for v in q)})")
PY
