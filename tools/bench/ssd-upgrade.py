#!/usr/bin/python3
# softssd upgrade pause as a guest sees it (a benchmark, not a test): the bench guest reads 4 KiB
# at QD1 from a softssd volume (isolated queue pair; doorbell pages polled, and eventfd with
# the shadow doorbell buffer) for a few seconds;
# in an upgrade round `lvmm ssd upgrade` replaces the daemon once in the middle, in a baseline
# round nothing happens. At QD1 the slowest I/O is the longest completion gap: the pause.
# usage: ssd-upgrade.py BUILD_DIR OUT_DIR [ROUNDS]   (writes OUT_DIR/ssd-upgrade.csv)
import csv
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import vms

SSD, VOL = "upgbench", "vol"
RUN_MS = 3000


def upgrade(lvmm):
    r = subprocess.run([lvmm, "ssd", "upgrade", SSD], capture_output=True, text=True, timeout=60)
    m = re.search(r"served by pid (\d+)", r.stdout)
    if r.returncode or not m:
        raise SystemExit(f"bench: upgrade failed: {r.stdout}{r.stderr}")
    return int(m.group(1))


def one_round(lvmm, guest, doorbell, do_upgrade):
    """(result dict, new daemon pid or None)."""
    cl = (f"bench.mode=work bench.rw=randread bench.qd=1 bench.qp=1 bench.ms={RUN_MS} "
          f"bench.ramp_ms=200 bench.seed=7")
    if doorbell == "eventfd":  # lvmm binds such a queue once the guest configured the buffer
        cl += " bench.dbbuf=on"
    argv = [lvmm, "run", "--kernel", guest, "--memory", "64M", "--vnvme",
            f"{SSD},vol={VOL},queues=1,mode=isolated,doorbell={doorbell}", "--cmdline", cl]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         errors="replace")
    started = threading.Event()
    res, lines = [None], []

    def reader():
        for line in p.stdout:
            lines.append(line)
            if "bench: work start" in line:
                started.set()
            elif "bench: work result" in line:
                res[0] = vms.parse_result(line)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    newpid = None
    if not started.wait(60):
        p.kill()
        raise SystemExit("bench: guest did not start: " + "".join(lines))
    if do_upgrade:
        time.sleep(RUN_MS / 2000)
        newpid = upgrade(lvmm)
    p.wait(timeout=RUN_MS / 1000 + 60)
    t.join(5)
    if res[0] is None:
        raise SystemExit("bench: no result: " + "".join(lines))
    return res[0], newpid


def main():
    build, out = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    lvmm = os.path.abspath(f"{build}/lvmm")
    guest = os.path.abspath(f"{build}/bench-guest/bench-guest.elf")
    d = tempfile.mkdtemp(prefix="lvmm-bench-upg-")
    os.environ["LVMM_RUN_DIR"] = d
    daemon = vms.start_daemon(lvmm, SSD, f"{d}/ssd.img", 128, "none", f"{d}/ssd.log")
    current = None  # a successor's pid (not our child)
    rows = []
    try:
        subprocess.run([lvmm, "ssd", "vol", "create", SSD, VOL, "32M"], check=True,
                       stdout=subprocess.DEVNULL)
        for r in range(rounds):
            for doorbell in ("poll", "eventfd"):
                for kind in ("baseline", "upgrade"):
                    res, pid = one_round(lvmm, guest, doorbell, kind == "upgrade")
                    if pid:
                        current = pid
                    rows.append({"round": r, "doorbell": doorbell, "kind": kind,
                                 "ios": res["ios"], "p99_us": res["p99_ns"] / 1000,
                                 "p999_us": res["p999_ns"] / 1000,
                                 "max_us": res.get("max_ns", 0) / 1000})
                    print(f"bench: upgrade {doorbell} {kind}: {res['ios']} I/Os, p99 "
                          f"{res['p99_ns'] / 1000:.0f} us, max {res.get('max_ns', 0) / 1000:.0f}"
                          " us", flush=True)
        with open(f"{d}/ssd.log") as f:
            log = f.read()
        gave = [int(x) for x in re.findall(r"handed over to pid \d+ in (\d+) us", log)]
        paused = [int(x) for x in re.findall(r"took over .* I/O paused (\d+) us", log)]
        if gave and paused:
            print(f"bench: daemon hand-over {min(gave)}-{max(gave)} us (old side, request to "
                  f"exit), I/O paused {min(paused)}-{max(paused)} us (first quiesce to resume)",
                  flush=True)
            for r in rows:
                r["daemon_paused_us"] = paused.pop(0) if r["kind"] == "upgrade" and paused else ""
    finally:
        if current:
            os.kill(current, signal.SIGTERM)
            for _ in range(400):
                if not os.path.exists(f"/proc/{current}") or \
                        ") Z " in open(f"/proc/{current}/stat").read():
                    break
                time.sleep(0.05)
        vms.stop(daemon)
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(out, exist_ok=True)
    with open(f"{out}/ssd-upgrade.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
