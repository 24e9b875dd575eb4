#!/usr/bin/python3
# Snapshot and migration bench (a benchmark, not a test), on the bench guest in bench.mode=memtouch
# (it fills all but 32 MiB of its RAM with non-zero data, then prints a heartbeat every 20 ms,
# rewriting DIRTY_MB MiB a second in the "writing" cases). Snapshot rows: vm.snapshot (the API
# call to its 204), memory.bin allocated (du) and apparent, vm.restore in a fresh lvmm (the API
# call; memory_restore_mode OnDemand, the file mapped, and Copy) and vm.restore's start to the
# first new heartbeat after vm.resume. Migration rows: total
# (vm.send-migration's call) and downtime (the source's "paused for N ms": pause to the
# destination's DONE), idle and writing, copy and local. Every case once per round, rounds
# interleaved.  usage: snapbench.py BUILD_DIR RESULTS_DIR
# Knobs: ROUNDS (3), SIZES_MB ("256 1024"), MIG_MB (256), DIRTY_MB (64), SMOKE=1 (one 64 MiB
# round of each case, the CSVs named snapshot-smoke*.csv).
import csv
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vms import host_line  # noqa: E402

FREE_MB = 32  # left untouched: the image, its stacks and page tables, the low MiBs


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class Lvmm:
    """One `lvmm run --api-socket` process, without a VM until one is created or received."""

    def __init__(self, build, d, name):
        self.sock, self.log = f"{d}/{name}.sock", f"{d}/{name}.log"
        if os.path.exists(self.sock):  # a killed lvmm's
            os.unlink(self.sock)
        self.p = subprocess.Popen([f"{build}/lvmm", "run", "--api-socket", self.sock],
                                  stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        for _ in range(200):
            if os.path.exists(self.sock):
                return
            time.sleep(0.02)
        sys.exit(f"snapbench: {self.sock} never appeared: {open(self.log).read()}")

    def put(self, ep, body=None, timeout=300):
        c = UnixHTTP(self.sock, timeout)
        c.request("PUT", f"/api/v1/{ep}", body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        text = r.read().decode()
        c.close()
        if r.status not in (200, 204):
            sys.exit(f"snapbench: {ep}: {r.status} {text}\n{open(self.log).read()[-2000:]}")
        return text

    def timed(self, ep, body=None):
        t0 = time.perf_counter()
        self.put(ep, body)
        return time.perf_counter() - t0

    def kill(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()

    def wait(self, limit_s=30):
        try:
            self.p.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            self.kill()


def heartbeat(console):
    """The last heartbeat number in the console file (-1 when none)."""
    last = -1
    for m in re.finditer(rb"^hb (\d+)$", open(console, "rb").read(), re.M):
        last = int(m.group(1))
    return last


def wait_for(fn, limit_s, what):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit_s:
        if fn():
            return time.perf_counter()
        time.sleep(0.002)
    sys.exit(f"snapbench: {what} within {limit_s} s")


class Bench:
    def __init__(self, build, results):
        self.build, self.results = build, results
        self.d = tempfile.mkdtemp(prefix="lvmm-bench-snap-", dir="/var/tmp")
        self.guest = os.path.realpath(f"{build}/bench-guest/bench-guest.elf")
        self.dirty_mb = int(os.environ.get("DIRTY_MB", "64"))

    def boot(self, name, mb, dirty):
        vm = Lvmm(self.build, self.d, name)
        console = f"{self.d}/{name}.console"
        open(console, "w").close()
        vm.put("vm.create", {
            "memory": {"size": mb << 20},
            "serial": {"mode": "File", "file": console},
            "payload": {"kernel": self.guest,
                        "cmdline": f"bench.mode=memtouch bench.touch_mb={mb - FREE_MB} "
                                   f"bench.dirty_mb={dirty}"}})
        vm.put("vm.boot")
        wait_for(lambda: heartbeat(console) >= 2, 120, f"{name}: no heartbeat after the touch")
        return vm, console

    def snapshot(self, mb, mode):
        vm, console = self.boot("snap-src", mb, 0)
        snap = f"{self.d}/snap"
        os.makedirs(snap, exist_ok=True)
        vm.put("vm.pause")
        last = heartbeat(console)
        t_save = vm.timed("vm.snapshot", {"destination_url": f"file://{snap}"})
        st = os.stat(f"{snap}/memory.bin")
        state = os.stat(f"{snap}/state.bin").st_size
        vm.kill()
        new = Lvmm(self.build, self.d, "snap-dst")
        t0 = time.perf_counter()
        new.put("vm.restore", {"source_url": f"file://{snap}", "memory_restore_mode": mode})
        t_restore = time.perf_counter() - t0
        new.put("vm.resume")
        t_alive = wait_for(lambda: heartbeat(console) > last, 30, "no heartbeat after the "
                           "restore") - t0
        new.put("vm.shutdown")
        new.put("vmm.shutdown")
        new.wait()
        shutil.rmtree(snap)
        return {"kind": "snapshot", "ram_mb": mb, "touched_mb": mb - FREE_MB,
                "restore_mode": mode,
                "snapshot_ms": round(t_save * 1000, 1),
                "memory_alloc_mb": round(st.st_blocks * 512 / 2**20, 1),
                "memory_apparent_mb": round(st.st_size / 2**20, 1), "state_bytes": state,
                "restore_ms": round(t_restore * 1000, 1),
                "restore_to_alive_ms": round(t_alive * 1000, 1)}

    def migrate(self, mb, writing, local):
        src, console = self.boot("mig-src", mb, self.dirty_mb if writing else 0)
        dst = Lvmm(self.build, self.d, "mig-dst")
        mig = f"{self.d}/mig.sock"
        done = {}
        rx = threading.Thread(target=lambda: done.update(
            t=dst.put("vm.receive-migration", {"receiver_url": f"unix:{mig}"})))
        rx.start()
        wait_for(lambda: os.path.exists(mig), 30, "no migration socket")
        t = src.timed("vm.send-migration", {"destination_url": f"unix:{mig}", "local": local})
        rx.join()
        src.wait()
        log = open(src.log).read()
        m = re.search(r"migrated to .*: (\d+) pre-copy rounds, (\d+) pages \((\d+) MiB\), "
                      r"(\d+) pages while paused, (\d+) bytes of state, "
                      r"(?:\d+ host fds handed over, )?paused for (\d+) ms", log)
        if not m:
            sys.exit(f"snapbench: no migration line in the source's log:\n{log[-2000:]}")
        last = heartbeat(console)
        wait_for(lambda: heartbeat(console) > last + 2, 30, "the migrated guest never ran")
        dst.put("vm.shutdown")
        dst.put("vmm.shutdown")
        dst.wait()
        return {"kind": "migration", "ram_mb": mb, "touched_mb": mb - FREE_MB,
                "guest": f"writing {self.dirty_mb} MiB/s" if writing else "idle",
                "how": "local" if local else "copy", "total_ms": round(t * 1000, 1),
                "downtime_ms": int(m.group(6)), "rounds": int(m.group(1)),
                "pages": int(m.group(2)), "paused_pages": int(m.group(4)),
                "state_bytes": int(m.group(5))}

    def cleanup(self):
        shutil.rmtree(self.d, ignore_errors=True)


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


def main():
    build, results = sys.argv[1], sys.argv[2]
    smoke = os.environ.get("SMOKE") == "1"
    rounds = 1 if smoke else int(os.environ.get("ROUNDS", "3"))
    sizes = [64] if smoke else [int(x) for x in os.environ.get("SIZES_MB", "256 1024").split()]
    mig_mb = 64 if smoke else int(os.environ.get("MIG_MB", "256"))
    os.makedirs(results, exist_ok=True)
    host = host_line()
    b = Bench(build, results)
    snaps, migs = [], []
    start = time.time()
    try:
        for r in range(rounds):
            for mb in sizes:
                for mode in ("OnDemand", "Copy"):
                    row = dict(round=r + 1, **b.snapshot(mb, mode))
                    snaps.append(row)
                    print(f"  round {r + 1} snapshot {mb} MiB {mode}: {row}", flush=True)
            for writing in (False, True):
                for local in (False, True):
                    row = dict(round=r + 1, **b.migrate(mig_mb, writing, local))
                    migs.append(row)
                    print(f"  round {r + 1} migration: {row}", flush=True)
    finally:
        b.cleanup()
    name = "snapshot-smoke" if smoke else "snapshot"
    write_csv(f"{results}/{name}.csv", snaps)
    write_csv(f"{results}/{name}-migration.csv", migs)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "host": host,
               "load_end": " ".join(open("/proc/loadavg").read().split()[:3]),
               "duration_s": int(time.time() - start), "rounds": rounds,
               "dirty_mb": b.dirty_mb, "lvmm": commit},
              open(f"{results}/{name}-host.json", "w"), indent=1)


if __name__ == "__main__":
    main()
