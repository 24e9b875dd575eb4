#!/usr/bin/python3
# Boot bench (a benchmark, not a test): wall and CPU time from starting lvmm to its exit after
# the bench guest's poweroff (bench.mode=hello: ring 0, ring 3, ACPI S5), for a few VM shapes,
# the shapes interleaved run by run so that host noise hits them alike.
# usage: boot.py BUILD_DIR OUT_CSV [RUNS]
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def main():
    build, out_csv = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    d = tempfile.mkdtemp(prefix="lvmm-bench-boot-", dir="/var/tmp")
    img = f"{d}/disk.img"
    base = [f"{build}/lvmm", "run", "--kernel", f"{build}/bench-guest/bench-guest.elf"]
    shapes = {
        "1 vCPU, 64 MiB": ["--memory", "64M"],
        "1 vCPU, 1 GiB": ["--memory", "1G"],
        "2 vCPUs, 64 MiB": ["--memory", "64M", "--cpus", "2"],
        "1 vCPU, 64 MiB, vNVMe": ["--memory", "64M", "--vnvme", f"file={img},size=64M"],
    }
    wall = {k: [] for k in shapes}
    cpu = {k: [] for k in shapes}
    try:
        for _ in range(runs):
            for name, extra in shapes.items():
                t0 = time.perf_counter()
                p = subprocess.Popen(base + extra, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
                out = p.stdout.read()
                _, status, ru = os.wait4(p.pid, 0)
                wall[name].append((time.perf_counter() - t0) * 1000)
                cpu[name].append((ru.ru_utime + ru.ru_stime) * 1000)
                if status != 0 or b"guest powered off" not in out:
                    sys.exit(f"boot: {name}: lvmm status {status}:\n{out.decode()}")
    finally:
        if os.path.exists(img):
            os.unlink(img)
        os.rmdir(d)
    rows = []
    for name in shapes:
        rows.append({"shape": name, "runs": runs,
                     "wall_ms_p50": round(pct(wall[name], 50), 1),
                     "wall_ms_p90": round(pct(wall[name], 90), 1),
                     "wall_ms_min": round(min(wall[name]), 1),
                     "wall_ms_mean": round(statistics.mean(wall[name]), 1),
                     "cpu_ms_mean": round(statistics.mean(cpu[name]), 1)})
        r = rows[-1]
        print(f"  {name:24s} wall p50 {r['wall_ms_p50']} ms p90 {r['wall_ms_p90']} ms "
              f"min {r['wall_ms_min']} ms, cpu {r['cpu_ms_mean']} ms", flush=True)
    with open(out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
