#!/usr/bin/python3
# vNVMe emulate mode over a softssd volume against emulate mode on an image file, side by side in
# RAM (storage.py BENCH_ONLY=ram's set-up: the softssd backing and the image in tmpfs), the bench
# guest's 4 KiB random reads (and writes with RW=both) on one queue pair, rounds interleaved.
# usage: emu-ssd.py BUILD [RESULTS_DIR]    knobs: BENCH_TIME (s per run, 5), ROUNDS (3),
#   QDS (1,32,128), VOL_MB (256), RW (read, or both), DIR (tmpfs, /dev/shm), BASE_LVMM (another
#   lvmm binary, e.g. main's: its emulate-over-SSD row runs in every round too, "emulate, ssd, base")
import os
import statistics
import sys

os.environ["BENCH_ONLY"] = "ram"
os.environ.setdefault("VOL_MB", "256")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import storage  # noqa: E402


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    results = sys.argv[2] if len(sys.argv) > 2 else None
    rounds = int(os.environ.get("ROUNDS", "3"))
    qds = [int(x) for x in os.environ.get("QDS", "1,32,128").split(",")]
    rws = ["randread", "randwrite"] if os.environ.get("RW") == "both" else ["randread"]
    b = storage.Bench(build, results or "/tmp")
    base = os.environ.get("BASE_LVMM")
    systems = [("emulate, file", "emulate-file", b.lvmm), ("emulate, ssd", "emulate", b.lvmm)]
    if base:
        systems.append(("emulate, ssd, base", "emulate", base))
    rows = []
    try:
        b.setup()
        if not b.emu_ssd:
            sys.exit("emu-ssd: this lvmm refuses mode=emulate on a volume")
        for rnd in range(1, rounds + 1):
            for rw in rws:
                for qd in qds:
                    for name, mode, lvmm in systems:
                        b.lvmm = lvmm
                        res, d, text = b.run_lvmm(mode, rw, qd, 1, rnd)
                        iops = res["iops"] if res else 0
                        if not res:
                            sys.stderr.write(f"emu-ssd: {name} {rw} qd{qd} failed:\n"
                                             f"{text[-2000:]}\n")
                        cpu = (d["vmm_us"] + d["vcpu_us"] + d["backend_us"]) if d else 0
                        print(f"emu-ssd: round {rnd} {name:18} {rw:9} qd {qd:3}: {iops:9.0f} "
                              f"IOPS, {cpu:6.1f} CPU us/I/O", flush=True)
                        rows.append({"round": rnd, "system": name, "rw": rw, "qd": qd,
                                     "iops": iops, "cpu_us": cpu})
    finally:
        b.cleanup()
    print("emu-ssd: median IOPS over the rounds (ssd / file)")
    for rw in rws:
        for qd in qds:
            med = {s[0]: statistics.median([r["iops"] for r in rows if r["system"] == s[0] and
                                            r["rw"] == rw and r["qd"] == qd])
                   for s in systems}
            ratio = med["emulate, ssd"] / med["emulate, file"] if med["emulate, file"] else 0
            more = f"  base ssd {med['emulate, ssd, base']:9.0f}" if base else ""
            print(f"emu-ssd: {rw:9} qd {qd:3}: file {med['emulate, file']:9.0f}  ssd "
                  f"{med['emulate, ssd']:9.0f}  ratio {ratio:.2f}{more}")
    if results:
        storage.write_csv(f"{results}/emu-ssd.csv", rows)


if __name__ == "__main__":
    main()
