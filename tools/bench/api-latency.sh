#!/usr/bin/env bash
# API round-trip latency (a benchmark, not a test): p50/p99 of vmm.ping and vm.info over the
# Unix socket, on a fresh connection per request and on one keep-alive connection, while the
# bench guest spins in a VM created through the API. With CSV_PREFIX it also writes
# CSV_PREFIX.csv (p50/p99/max per case) and CSV_PREFIX-cdf.csv (percentiles 1..100 per case).
# usage: tools/bench/api-latency.sh [BUILD_DIR] [REQUESTS] [CSV_PREFIX]   (default build, 2000)
set -euo pipefail
build=${1:-build}
n=${2:-2000}
csv=${3:-}
lvmm=${LVMM:-$build/lvmm}
guest=$build/bench-guest/bench-guest.elf
[ -x "$lvmm" ] || { echo "api-latency: no $lvmm (make first)" >&2; exit 1; }
[ -r "$guest" ] || { echo "api-latency: no $guest (make first)" >&2; exit 1; }

dir=$(mktemp -d /tmp/lvmm-api-bench-XXXXXX)
sock=$dir/api.sock
"$lvmm" run --api-socket "$sock" >"$dir/lvmm.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done

curl -sf --unix-socket "$sock" -X PUT http://localhost/api/v1/vm.create --data-binary \
	"{\"memory\": {\"size\": 67108864}, \"serial\": {\"mode\": \"Null\"},
	  \"payload\": {\"kernel\": \"$(realpath "$guest")\", \"cmdline\": \"bench.mode=spin\"}}"
curl -sf --unix-socket "$sock" -X PUT http://localhost/api/v1/vm.boot

/usr/bin/python3 - "$sock" "$n" "$csv" <<'PY'
import csv, socket, sys, time

path, n, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
summary, cdf = [], {}

def read_answer(s, buf):
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, _, rest = buf.partition(b"\r\n\r\n")
    clen = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            clen = int(line.split(b":")[1])
    while len(rest) < clen:
        rest += s.recv(65536)
    assert head.startswith(b"HTTP/1.1 200"), head
    return rest[clen:]

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]

def run(endpoint, keepalive):
    req = f"GET /api/v1/{endpoint} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
    lat = []
    s = None
    buf = b""
    for _ in range(n):
        t0 = time.perf_counter()
        if s is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
        s.sendall(req)
        buf = read_answer(s, buf)
        if not keepalive:
            s.close()
            s = None
        lat.append((time.perf_counter() - t0) * 1e6)
    if s:
        s.close()
    conn = 'keep-alive' if keepalive else 'new conn'
    print(f"{endpoint:9s} {conn:10s} n={n}"
          f"  p50 {pct(lat, 50):7.1f} us  p99 {pct(lat, 99):7.1f} us  max {max(lat):8.1f} us")
    summary.append({"endpoint": endpoint, "connection": conn, "requests": n,
                    "p50_us": round(pct(lat, 50), 1), "p99_us": round(pct(lat, 99), 1),
                    "max_us": round(max(lat), 1)})
    cdf[f"{endpoint} {conn}"] = [round(pct(lat, p), 1) for p in range(1, 101)]

for ep in ("vmm.ping", "vm.info"):
    for ka in (False, True):
        run(ep, ka)

if prefix:
    with open(prefix + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summary[0].keys()))
        w.writeheader()
        w.writerows(summary)
    with open(prefix + "-cdf.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["percentile"] + list(cdf.keys()))
        for i in range(100):
            w.writerow([i + 1] + [v[i] for v in cdf.values()])
PY

curl -sf --unix-socket "$sock" -X PUT http://localhost/api/v1/vmm.shutdown
wait $pid
trap 'rm -rf "$dir"' EXIT
