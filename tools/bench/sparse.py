#!/usr/bin/python3
# Sparse I/O: one 4 KiB random read every GAP_US (5000) microseconds at queue depth 1, the case
# where a backend worker has gone to sleep before every request. Rows, interleaved round by
# round: the native client (softssd-bench-client) with eventfd doorbells and with polled doorbell
# pages, and the bench guest on lvmm's vNVMe in isolated mode with doorbell=poll, with
# doorbell=eventfd with the shadow doorbell buffer (bench.dbbuf=on: the guest rings only when
# the backend asked through EventIdx, which it does before it sleeps) and with doorbell=auto
# (the default: pages until the guest's Doorbell Buffer Config, eventfd doorbells on the shadow
# buffer from then on; bench.dbbuf=on). Latency from the
# client's or the guest's clock; softssd's CPU per I/O from /proc.
# usage: sparse.py BUILD RESULTS [DOC]   knobs: ROUNDS (3), SPARSE_SECS (4), GAP_US (5000)
# Writes RESULTS/sparse.csv and prints a Markdown table, which replaces the one between
# <!-- bench:sparse --> and <!-- /bench:sparse --> in DOC when given.
import csv
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vms  # noqa: E402


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    build, results = sys.argv[1], sys.argv[2]
    rounds = int(os.environ.get("ROUNDS", "3"))
    secs = float(os.environ.get("SPARSE_SECS", "4"))
    gap = int(os.environ.get("GAP_US", "5000"))
    os.makedirs(results, exist_ok=True)
    d = tempfile.mkdtemp(prefix="lvmm-sparse-", dir=os.environ.get("DIR", "/var/tmp"))
    os.environ["LVMM_RUN_DIR"] = d
    os.environ["LVMM_STATE_DIR"] = d
    lvmm, client = f"{build}/lvmm", f"{build}/softssd-bench-client"
    guest = f"{build}/bench-guest/bench-guest.elf"
    ssd = f"sparse{os.getpid()}"
    daemon = vms.start_daemon(lvmm, ssd, f"{d}/ssd.img", 512, "none", f"{d}/ssd.log")
    subprocess.run([client, ssd, "native", "64", "--fill"], check=True, stdout=subprocess.DEVNULL)
    rows = []
    try:
        for rnd in range(1, rounds + 1):
            for name, kind, opt in (("native client, eventfd doorbell", "native", "eventfd"),
                                    ("native client, polled doorbell page", "native", "poll"),
                                    ("lvmm isolated, doorbell=poll", "lvmm", "poll"),
                                    ("lvmm isolated, doorbell=eventfd + dbbuf", "lvmm",
                                     "eventfd"),
                                    ("lvmm isolated, doorbell=auto", "lvmm", "auto")):
                c0 = proc_cpu_s(daemon.pid)
                if kind == "native":
                    out = subprocess.run([client, ssd, "native", "64", "--qd", "1", "--db", opt,
                                          "--gap-us", str(gap), "--ms", str(int(secs * 1000))],
                                         capture_output=True, text=True, timeout=secs + 60)
                    kv = dict(t.split("=") for t in out.stdout.split() if "=" in t)
                    if out.returncode or "p50_us" not in kv:
                        print(f"sparse: {name}: failed: {out.stderr[-300:]}", flush=True)
                        continue
                    ios, p50, p99 = int(kv["ios"]), float(kv["p50_us"]), float(kv["p99_us"])
                else:
                    extra = " bench.dbbuf=on" if opt in ("eventfd", "auto") else ""
                    argv = [lvmm, "run", "--kernel", guest, "--memory", "64M", "--vnvme",
                            f"{ssd},vol=native,mode=isolated,doorbell={opt}", "--cmdline",
                            f"bench.mode=work bench.rw=randread bench.qd=1 bench.gap_us={gap} "
                            f"bench.ms={int(secs * 1000)} bench.ramp_ms=200 bench.seed={rnd}"
                            f"{extra}"]
                    res, _, text = vms.run_guest(argv, daemon.pid, secs + 90)
                    if not res:
                        print(f"sparse: {name}: failed: {text[-400:]}", flush=True)
                        continue
                    ios, p50, p99 = res["ios"], res["p50_ns"] / 1e3, res["p99_ns"] / 1e3
                cpu_us = (proc_cpu_s(daemon.pid) - c0) * 1e6 / max(ios, 1)
                rows.append({"round": rnd, "row": name, "ios": ios, "p50_us": p50,
                             "p99_us": p99, "softssd_cpu_us_per_io": cpu_us})
                print(f"sparse: round {rnd} {name}: {ios} I/Os, p50 {p50:.0f} us, "
                      f"p99 {p99:.0f} us, softssd {cpu_us:.0f} us CPU/I/O", flush=True)
    finally:
        vms.stop(daemon)
        subprocess.run(["rm", "-rf", d])
    with open(f"{results}/sparse.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["row"])
        w.writeheader()
        w.writerows(rows)
    names = list(dict.fromkeys(r["row"] for r in rows))
    ref = [r["p50_us"] for r in rows if r["row"].startswith("native client, eventfd")]
    ref99 = [r["p99_us"] for r in rows if r["row"].startswith("native client, eventfd")]
    lines = ["| row | rounds | p50 us | p99 us | p50 / native eventfd | p99 / native eventfd "
             "| softssd CPU us/I/O |", "|---|---|---|---|---|---|---|"]
    for n in names:
        rs = [r for r in rows if r["row"] == n]

        def med(k):
            return statistics.median(r[k] for r in rs)

        def spread(k, digits=0):
            v = [r[k] for r in rs]
            return f"{med(k):.{digits}f} ({min(v):.{digits}f}-{max(v):.{digits}f})"
        r50 = med("p50_us") / statistics.median(ref) if ref else float("nan")
        r99 = med("p99_us") / statistics.median(ref99) if ref99 else float("nan")
        lines.append(f"| {n} | {len(rs)} | {spread('p50_us')} | {spread('p99_us')} | "
                     f"{r50:.2f} | {r99:.2f} | {spread('softssd_cpu_us_per_io')} |")
    table = "\n".join(lines)
    print(table)
    if len(sys.argv) > 3 and rows:
        doc = open(sys.argv[3]).read()
        a, b = "<!-- bench:sparse -->", "<!-- /bench:sparse -->"
        if a in doc and b in doc:
            doc = doc[:doc.index(a) + len(a)] + "\n" + table + "\n" + doc[doc.index(b):]
            open(sys.argv[3], "w").write(doc)


if __name__ == "__main__":
    main()
