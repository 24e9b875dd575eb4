#!/usr/bin/python3
# Storage benchmarks side by side (a benchmark, not a test): the bench guest's workload engine
# (bench.mode=work, vblk) in lvmm's emulate, isolated and passthrough modes and its virtio-blk, the native softssd
# client, QEMU's emulated NVMe (plain, shadow doorbells, SQs in its CMB) and virtio-blk on
# microvm; then N lvmm VMs on one softssd; then boot time and memory of lvmm and QEMU. Rows are
# interleaved round by round.
# usage: storage.py BUILD RESULTS_DIR      knobs (environment): BENCH_TIME (s per run, 5),
#   ROUNDS (2), VOL_MB (1024), SCALE (25,50,100,200), SCALE_MODES (isolated,passthrough),
#   BOOT_RUNS (10), MODEL (softssd --model, none), LINUX_RUNS (0: boots of the Linux test
#   kernel to "Run /init", minutes each on a loaded kvm_pvm host), SMOKE=1 (one of each row kind),
#   BENCH_ONLY=mq (only the 4-queue-pair rows: native, lvmm on 1 vCPU and on 2 vCPUs each driving
#   2 of the pairs, into storage-mq.csv; no scale or boot runs), BENCH_ONLY=virtio (lvmm's
#   virtio-blk, lvmm's vNVMe in emulate mode on the same image file and QEMU's virtio-blk and
#   nvme on it, QD1 and QD32 reads and writes on one queue pair, into storage-virtio.csv),
#   BENCH_ONLY=ram (the software's cost apart from any disk: the softssd backing and the image in
#   tmpfs, DIR=/dev/shm unless set; fio with io_uring on the image as the native reference, then
#   softssd's own client, lvmm's modes and virtio-blk, QEMU's nvme and virtio-blk, reads and
#   writes at QD1/32/128 on one queue pair, into storage-ram.csv; IOPS per busy host core from
#   every process's CPU time), BENCH_ONLY=vms (single-VM saturation, lvmm isolated reads at
#   QD32/128, then the N-VM scale points, into storage-vms.csv and scale-vms.csv: the many-VM
#   picture of a host without the rest; DIR as set, /var/tmp by default)
import csv
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vms  # noqa: E402

QEMU = shutil.which("qemu-system-x86_64")
QEMU_BASE = ["-name", "bench,debug-threads=on", "-machine", "microvm,accel=kvm,pcie=on,pit=off,pic=off,rtc=off",
             "-cpu", "host,-arch-capabilities", "-m", "128M", "-nographic", "-nodefaults",
             "-serial", "stdio", "-no-reboot", "-device", "isa-debug-exit,iobase=0xf4,iosize=1"]
SSD = f"bench{os.getpid()}"
VOL = "bench"


class Bench:
    def __init__(self, build, results):
        self.build, self.results = build, results
        self.lvmm = f"{build}/lvmm"
        self.guest = f"{build}/bench-guest/bench-guest.elf"
        self.client = f"{build}/softssd-bench-client"
        self.secs = float(os.environ.get("BENCH_TIME", "5"))
        self.rounds = int(os.environ.get("ROUNDS", "2"))
        self.smoke = os.environ.get("SMOKE") == "1"
        self.only = os.environ.get("BENCH_ONLY", "")
        if self.only not in ("", "mq", "virtio", "ram", "vms"):
            sys.exit(f"storage.py: BENCH_ONLY={self.only}: only 'mq', 'virtio', 'ram' and 'vms' "
                     "are known")
        self.vol_mb = int(os.environ.get("VOL_MB", "64" if self.smoke else "1024"))
        self.ram = self.only == "ram"
        base = os.environ.get("DIR", "/dev/shm" if self.ram else "/var/tmp")
        if self.ram and fs_type(base) != "tmpfs":
            sys.exit(f"storage.py: BENCH_ONLY=ram wants DIR on tmpfs; {base} is "
                     f"{fs_type(base) or 'unknown'}")
        self.dir = tempfile.mkdtemp(prefix="lvmm-bench-", dir=base)
        os.environ["LVMM_RUN_DIR"] = self.dir
        os.environ["LVMM_STATE_DIR"] = "/proc/lvmm-none"  # never auto-start another SSD
        os.environ["LVMM_STATS"] = "1"
        self.img = f"{self.dir}/disk.img"
        self.daemon = None
        self.perf_out = f"{self.dir}/perf.txt" if vms.perf_ready() else None

    def ms(self):
        return int(self.secs * 1000)

    def setup(self):
        self.emu_ssd = False
        # QEMU (and lvmm emulate where it cannot use a volume) read this image; the softssd volume holds the same kind of bytes
        with open(self.img, "wb") as f:
            for _ in range(self.vol_mb):
                f.write(os.urandom(1 << 20))
            os.fsync(f.fileno())
        self.daemon = vms.start_daemon(self.lvmm, SSD, f"{self.dir}/ssd.img", self.vol_mb + 64,
                                       os.environ.get("MODEL", "none"), f"{self.dir}/ssd.log",
                                       ["--max-clients", "512"])
        subprocess.run([self.client, SSD, VOL, str(self.vol_mb), "--fill"], check=True,
                       stdout=subprocess.DEVNULL)
        os.sync()
        self.emu_ssd = self.emulate_on_ssd()
        print(f"bench: lvmm emulate on {'the softssd volume' if self.emu_ssd else 'the image'}",
              flush=True)

    def cleanup(self):
        vms.stop(self.daemon)
        shutil.rmtree(self.dir, ignore_errors=True)

    def cmdline(self, rw, qd, qp, seed, extra="", mode="work"):
        # a polled device is warm within milliseconds: a tenth of the run, at most half a second
        ramp = min(500, self.ms() // 10)
        return (f"bench.mode={mode} bench.rw={rw} bench.qd={qd} bench.qp={qp} bench.ms={self.ms()} "
                f"bench.ramp_ms={ramp} bench.seed={seed}{extra}")

    # ---- one row ----
    def emulate_on_ssd(self):
        """lvmm builds before emulate-over-SSD refuse mode=emulate on a volume."""
        r = subprocess.run([self.lvmm, "run", "--kernel", self.guest, "--memory", "64M",
                            "--vnvme", f"{SSD},vol={VOL},mode=emulate", "--cmdline",
                            "bench.mode=hello"], capture_output=True, text=True, timeout=60)
        return r.returncode == 0 and "powering off" in r.stdout

    def run_lvmm(self, mode, rw, qd, qp, seed, cpus=1):
        """cpus > 1: the bench guest puts queue pair i on vCPU i % cpus (bench.cpus)."""
        if mode == "emulate-file":
            mode, vn = "emulate", f"file={self.img},queues={qp}"
        else:
            vn = f"{SSD},vol={VOL},queues={qp},mode={mode}"
        if mode == "emulate" and not self.emu_ssd:
            vn = f"file={self.img},queues={qp}"
        smp = f" bench.cpus={cpus}" if cpus > 1 else ""
        argv = [self.lvmm, "run", "--kernel", self.guest, "--memory", "64M", "--vnvme", vn,
                "--cpus", str(cpus), "--cmdline", self.cmdline(rw, qd, qp, seed, smp)]
        res, d, text = vms.run_guest(argv, None if vn.startswith("file=") else self.daemon.pid,
                                     self.secs + 90, self.perf_out)
        if res:
            ios = res["reads"] + res["writes"]
            wk = vms.lvmm_stat(text, "wake-ups")
            d["wakeups"] = wk / ios if wk is not None else None
            if vn.startswith("file="):  # the I/O thread is emulate's backend
                d["backend_us"] = d["vmm_us"]
        return res, d, text

    def run_lvmm_vblk(self, rw, qd, qp, seed):
        """lvmm's virtio-blk on the image QEMU's rows read, driven by the same vblk loop;
        O_DIRECT as QEMU's cache=none and the vNVMe's file backend (no page cache hits)."""
        direct = "off" if self.ram else "on"  # RAM rows: the page cache is the medium
        argv = [self.lvmm, "run", "--kernel", self.guest, "--memory", "64M", "--disk",
                f"path={self.img},num_queues={qp},queue_size=1024,direct={direct}", "--cmdline",
                self.cmdline(rw, qd, qp, seed, "", "vblk")]
        res, d, text = vms.run_guest(argv, None, self.secs + 90, self.perf_out)
        if res:
            d["backend_us"] = d["vmm_us"]  # the disk's I/O thread is lvmm's
            d["wakeups"] = None
        return res, d, text

    def run_qemu(self, variant, rw, qd, qp, seed):
        dev = "nvme,drive=d0,serial=bench,max_ioqpairs=8"
        extra, mode = "", "work"
        if variant == "vblk":
            dev = f"virtio-blk-pci,drive=d0,queue-size=1024,num-queues={qp}"
            mode = "vblk"
        elif variant == "dbbuf":
            extra = " bench.dbbuf=on"
        elif variant == "cmb":
            dev += ",cmb_size_mb=16"
            extra = " bench.sq=cmb"
        argv = [QEMU, *QEMU_BASE, "-kernel", self.guest,
                "-append", self.cmdline(rw, qd, qp, seed, extra, mode),
                "-drive", f"file={self.img},if=none,id=d0,format=raw,"
                f"cache={'writeback' if self.ram else 'none'},aio=io_uring",
                "-device", dev]
        res, d, text = vms.run_guest(argv, None, self.secs + 90, self.perf_out)
        if res:
            d["backend_us"] = d["vmm_us"]  # QEMU's main loop and I/O threads
            d["wakeups"] = None
        return res, d, text

    def run_native(self, rw, qd, qp, seed):
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        dc0 = vms.proc_cpu(self.daemon.pid)
        t0 = time.perf_counter()
        p = subprocess.run([self.client, SSD, VOL, str(self.vol_mb), "--qd", str(qd), "--qp",
                            str(qp), "--ms", str(self.ms()), "--poll", "--rw", rw, "--mode",
                            "passthrough"], capture_output=True, text=True,
                           timeout=self.secs + 90)
        wall = time.perf_counter() - t0
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        dc1 = vms.proc_cpu(self.daemon.pid)
        kv = dict(x.split("=", 1) for x in p.stdout.split() if "=" in x)
        if p.returncode or "iops" not in kv:
            return None, None, p.stdout + p.stderr
        ios = int(kv["ios"])
        us = {k: float(kv[k]) for k in ("mean_us", "p50_us", "p90_us", "p99_us", "p999_us")}
        res = {"iops": float(kv["iops"]), "mean_ns": us["mean_us"] * 1e3,
               "p50_ns": us["p50_us"] * 1e3, "p99_ns": us["p99_us"] * 1e3,
               "p999_ns": us["p999_us"] * 1e3, "reads": ios - int(kv["writes"]),
               "writes": int(kv["writes"]), "errors": 0}
        cpu = (c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime) * 1e6 / max(ios, 1)
        d = {"vcpu_us": cpu, "vmm_us": 0.0, "backend_us": (dc1 - dc0) * 1e6 / max(ios, 1),
             "exits": 0.0, "user_exits": 0.0, "wakeups": 0.0, "wall_s": wall}
        return res, d, p.stdout

    def run_fio(self, rw, qd, qp, seed):
        """fio with io_uring on the image QEMU's rows read: the native reference of the RAM
        rows (registered files and buffers: what a practitioner tuning it would set)."""
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run(["fio", "--name=ram", f"--filename={self.img}", "--ioengine=io_uring",
                            "--fixedbufs=1", "--registerfiles=1", f"--direct={0 if self.ram else 1}",
                            "--bs=4k", f"--rw={rw}", f"--iodepth={qd}", f"--numjobs={qp}",
                            "--group_reporting=1", "--time_based", f"--runtime={self.secs}",
                            f"--ramp_time={min(0.5, self.secs / 10)}", f"--size={self.vol_mb}M",
                            f"--randseed={seed}", "--lat_percentiles=1", "--output-format=json"],
                           capture_output=True, text=True, timeout=self.secs + 90)
        wall = time.perf_counter() - t0
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            job = json.loads(p.stdout[p.stdout.index("{"):])["jobs"][0]
        except (ValueError, KeyError, IndexError):
            return None, None, p.stdout + p.stderr
        side = job["read" if "read" in rw else "write"]
        ios = side["total_ios"]
        pct = side["lat_ns"].get("percentile", {})
        res = {"iops": side["iops"], "mean_ns": side["lat_ns"]["mean"],
               "p50_ns": pct.get("50.000000", 0), "p99_ns": pct.get("99.000000", 0),
               "p999_ns": pct.get("99.900000", 0), "reads": ios if "read" in rw else 0,
               "writes": 0 if "read" in rw else ios, "errors": 0}
        # the whole process, ramp included: per I/O over every I/O it did
        all_ios = ios + side["iops"] * min(0.5, self.secs / 10)
        cpu = (c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime) * 1e6 / max(all_ios, 1)
        d = {"vcpu_us": cpu, "vmm_us": 0.0, "backend_us": 0.0, "exits": 0.0, "user_exits": 0.0,
             "wakeups": 0.0, "wall_s": wall}
        return res, d, p.stdout

    # ---- the matrix ----
    def systems(self):
        s = [("native", lambda *a: self.run_native(*a))]
        if self.ram and shutil.which("fio"):
            s.insert(0, ("fio io_uring", lambda *a: self.run_fio(*a)))
        for m in ("passthrough", "isolated", "emulate"):
            s.append((f"lvmm {m}", lambda *a, m=m: self.run_lvmm(m, *a)))
        s.append(("lvmm virtio-blk", lambda *a: self.run_lvmm_vblk(*a)))
        if QEMU:
            s.append(("QEMU nvme", lambda *a: self.run_qemu("plain", *a)))
            s.append(("QEMU virtio-blk", lambda *a: self.run_qemu("vblk", *a)))
        return s

    def configs(self):
        if self.only == "mq":
            return [(rw, qd, 4) for rw in ("randread", "randwrite") for qd in (1, 32, 128)]
        if self.only == "virtio":
            return [(rw, qd, 1) for rw in ("randread", "randwrite") for qd in (1, 32)]
        if self.only == "vms":
            return [("randread", qd, 1) for qd in (32, 128)]
        if self.ram:
            if self.smoke:
                return [("randread", 1, 1), ("randwrite", 32, 1)]
            return [(rw, qd, 1) for rw in ("randread", "randwrite") for qd in (1, 32, 128)]
        if self.smoke:
            return [("randread", 1, 1), ("randwrite", 4, 2)]
        return [(rw, qd, qp) for rw in ("randread", "randwrite") for qp in (1, 4)
                for qd in (1, 32, 128)]

    def storage(self):
        rows = []
        extra = []  # QEMU's CMB and shadow-doorbell variants: reads, one queue pair
        if QEMU and not self.smoke:
            extra = [(n, lambda *a, v=v: self.run_qemu(v, *a)) for n, v in
                     (("QEMU nvme, shadow doorbells", "dbbuf"), ("QEMU nvme, SQ in CMB", "cmb"))]
        if self.emu_ssd and not self.smoke and self.only in ("", "ram"):  # on QEMU's image
            extra.append(("lvmm emulate, file", lambda *a: self.run_lvmm("emulate-file", *a)))
        # the same queue pairs spread over two vCPUs (bench.cpus=2)
        mq = [(f"lvmm {m}, 2 vCPUs", lambda *a, m=m: self.run_lvmm(m, *a, cpus=2))
              for m in ("passthrough", "isolated", "emulate")]
        for rnd in range(1, self.rounds + 1):
            for rw, qd, qp in self.configs():
                runs = list(self.systems())
                if self.only == "virtio":  # every row on the one image file
                    runs = [r for r in runs if r[0] in ("lvmm virtio-blk", "QEMU virtio-blk",
                                                        "QEMU nvme")]
                    runs.insert(1, ("lvmm emulate, file",
                                    lambda *a: self.run_lvmm("emulate-file", *a)))
                if self.only == "mq":
                    runs = [r for r in runs if not r[0].startswith("QEMU")]
                if self.only == "vms":  # the saturation the scale points are a share of
                    runs = [r for r in runs if r[0] == "lvmm isolated"]
                if self.ram:  # every row in every round: the ratios are the point
                    runs += [r for r in extra if r[0] == "lvmm emulate, file"]
                # the variants are not in any target's ratio: one round of them (two when
                # runs are long), so that make bench BENCH_TIME=2 stays under 10 minutes
                if rw == "randread" and qp == 1 and (rnd == 1 or self.secs > 2) and \
                        self.only not in ("virtio", "ram", "vms"):
                    runs += extra
                # the 2-vCPU rows: all of them with BENCH_ONLY=mq; in the full matrix at QD32
                # in round 1, and only when runs are long (BENCH_TIME=2 keeps its 10 minutes)
                if qp > 1 and not self.smoke and (self.only == "mq" or
                                                  (rnd == 1 and qd == 32 and self.secs > 2)):
                    runs += mq
                for name, fn in runs:
                    res, d, text = fn(rw, qd, qp, rnd)
                    row = {"round": rnd, "system": name, "rw": rw, "qd": qd, "qp": qp,
                           "ok": int(bool(res))}
                    if res:
                        row.update(iops=res["iops"], mean_us=res["mean_ns"] / 1e3,
                                   p50_us=res["p50_ns"] / 1e3, p99_us=res["p99_ns"] / 1e3,
                                   p999_us=res["p999_ns"] / 1e3,
                                   exits_per_io=d.get("exits"),
                                   user_exits_per_io=d.get("user_exits"),
                                   wakeups_per_io=d.get("wakeups"),
                                   vmm_cpu_us=d["vmm_us"], vcpu_cpu_us=d["vcpu_us"],
                                   backend_cpu_us=d["backend_us"])
                        busy = d["vmm_us"] + d["vcpu_us"] + d["backend_us"]
                        # what one fully busy host core would do at this CPU cost per I/O
                        row["iops_per_core"] = 1e6 / busy if busy > 0 else None
                    else:
                        sys.stderr.write(f"bench: {name} {rw} qd{qd} qp{qp} failed:\n"
                                         f"{text[-2000:]}\n")
                    print(f"bench: round {rnd} {name:28} {rw:9} qd {qd:3} qp {qp}: "
                          f"{row.get('iops', 0):8.0f} IOPS p50 {row.get('p50_us', 0):8.1f} us",
                          flush=True)
                    rows.append(row)
                    # after every row: a run cut short keeps what it measured
                    write_csv(f"{self.results}/storage{'-' + self.only if self.only else ''}"
                              ".csv", rows)
        return rows

    # ---- N VMs on one SSD ----
    def scale(self, sat_iops):
        counts = [int(x) for x in os.environ.get(
            "SCALE", "2" if self.smoke else "25,50,100,200").split(",")]
        modes = os.environ.get("SCALE_MODES", "isolated" if self.smoke else
                               "isolated,passthrough").split(",")
        waits = os.environ.get("SCALE_WAIT", "halt").split(",")
        # the smallest point also polls, to show what spinning guests cost the host
        poll_at = int(os.environ.get("SCALE_POLL_AT", "0" if self.smoke else str(counts[0])))
        rows = []
        for n in counts:
            for mode in modes:
                for wait in waits + (["poll"] if n == poll_at and "poll" not in waits else []):
                    rows.append(self.scale_point(n, mode, wait, sat_iops))
                    write_csv(f"{self.results}/scale{'-' + self.only if self.only else ''}.csv",
                              rows)
        return rows

    def scale_point(self, n, mode, wait, sat_iops):
        # every VM boots before any measures: the ramp covers the start of all of them
        # 30 ms apart, a boot each: 100 ms per VM leaves room for the boots on two cores
        ramp = int(1000 + n * 100)
        cl = f"bench.mode=work bench.rw=randread bench.qd=1 bench.ms={self.ms()} bench.wait={wait}"
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        dc0 = vms.proc_cpu(self.daemon.pid)
        procs, late = [], 0
        t0 = time.monotonic()
        for i in range(n):
            log = open(f"{self.dir}/vm{i}.log", "w+")
            err = open(f"{self.dir}/vm{i}.err", "w")  # lvmm's own lines apart from the guest's
            # the same measured window for every VM: a later start, a shorter warm-up
            r = max(0, ramp - int((time.monotonic() - t0) * 1000))
            late += r == 0
            p = subprocess.Popen([self.lvmm, "run", "--kernel", self.guest, "--memory", "64M",
                                  "--vnvme", f"{SSD},vol={VOL},readonly=on,mode={mode}",
                                  "--cmdline", cl + f" bench.seed={i + 1} bench.ramp_ms={r}"],
                                 stdout=log, stderr=err)
            err.close()
            procs.append((p, log))
            time.sleep(0.03)  # paced: boots are CPU work; spread them over the ramp
        time.sleep(max(0, ramp / 1000 - (time.monotonic() - t0)) + self.secs / 2)
        mem = [m for m in (vms.memory(p.pid) for p, _ in procs) if m]
        deadline = time.monotonic() + self.secs + ramp / 1000 + 120
        for p, _ in procs:
            try:
                p.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        dc1 = vms.proc_cpu(self.daemon.pid)
        res = []
        for p, log in procs:
            log.seek(0)
            for line in log:
                r = vms.parse_result(line)
                if r:
                    res.append(r)
            log.close()
        iops = [r["iops"] for r in res]
        ios = sum(r["reads"] for r in res)
        agg = sum(iops)
        jain = agg * agg / (len(iops) * sum(x * x for x in iops)) if iops and agg else 0
        row = {"vms": n, "mode": mode, "wait": wait, "ok_vms": len(res), "late_vms": late, "aggregate_iops": agg,
               "single_vm_saturation_iops": sat_iops,
               "ratio": agg / sat_iops if sat_iops else None,
               "mean_us": sum(r["mean_ns"] for r in res) / len(res) / 1e3 if res else None,
               "p99_us_median_vm": sorted(r["p99_ns"] for r in res)[len(res) // 2] / 1e3
               if res else None,
               "p99_us_worst_vm": max(r["p99_ns"] for r in res) / 1e3 if res else None,
               "jain": jain,
               "host_cpu_us_per_io": ((c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime) +
                                      (dc1 - dc0)) * 1e6 / max(ios, 1),
               # of which softssd's (the rest: the lvmm processes, vCPU threads included)
               "softssd_cpu_us_per_io": (dc1 - dc0) * 1e6 / max(ios, 1),
               "rss_mib": sum(m["rss_kib"] for m in mem) / len(mem) / 1024 if mem else None,
               "pss_mib": sum(m["pss_kib"] for m in mem) / len(mem) / 1024 if mem else None,
               "private_mib": sum(m["private_kib"] for m in mem) / len(mem) / 1024
               if mem else None}
        print(f"bench: scale {n} VMs {mode} {wait}: {row['ok_vms']} ok, {agg:.0f} IOPS, "
              f"Jain {jain:.3f}", flush=True)
        return row

    # ---- boot and footprint ----
    def boot_once(self, argv):
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        first = None
        buf = b""
        while True:
            ch = p.stdout.read(1)
            if not ch:
                break
            buf += ch
            if first is None and buf.endswith(b"bench: h"):
                first = time.perf_counter() - t0
        p.wait()
        return first, time.perf_counter() - t0, b"done, powering off" in buf

    def linux_init(self, argv, limit_s=300):
        """Seconds from exec to the kernel's "Run /init" line, or None."""
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             errors="replace")
        t = None
        for line in p.stdout:
            if "Run /init" in line:
                t = time.perf_counter() - t0
                break
            if time.perf_counter() - t0 > limit_s:
                break
        p.kill()
        p.wait()
        return t

    def footprint_once(self, argv):
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        m = None
        for line in p.stdout:
            if "heartbeat 2" in line:
                m = vms.memory(p.pid)
                break
        p.kill()
        p.wait()
        return m

    def boot(self):
        runs = int(os.environ.get("BOOT_RUNS", "2" if self.smoke else "10"))
        vmms = {"lvmm": [self.lvmm, "run", "--kernel", self.guest, "--memory", "128M",
                         "--cmdline"]}
        if QEMU:
            vmms["QEMU microvm"] = [QEMU, *QEMU_BASE, "-kernel", self.guest, "-append"]
        rows = []
        for rnd in range(1, runs + 1):
            for name, base in vmms.items():
                first, total, ok = self.boot_once(base + ["bench.mode=hello"])
                rows.append({"round": rnd, "vmm": name, "first_output_ms":
                             first * 1e3 if first else None, "poweroff_ms": total * 1e3,
                             "ok": int(ok)})
        kernel = os.environ.get("LINUX_KERNEL", f"{self.build}/guest/vmlinux")
        initrd = os.environ.get("LINUX_INITRAMFS", f"{self.build}/guest/initramfs.cpio")
        for rnd in range(1, int(os.environ.get("LINUX_RUNS", "0")) + 1):
            if not os.path.exists(kernel):
                break
            t = self.linux_init([self.lvmm, "run", "--kernel", kernel, "--initramfs", initrd,
                                 "--memory", "256M", "--cmdline", "console=ttyS0"])
            rows.append({"round": rnd, "vmm": "lvmm, Linux test kernel", "run_init_ms":
                         t * 1e3 if t else None, "ok": int(t is not None)})
        for name, base in vmms.items():
            m = self.footprint_once(base + ["bench.mode=spin"])
            if m:
                rows.append({"round": 0, "vmm": name, "rss_mib": m["rss_kib"] / 1024,
                             "pss_mib": m["pss_kib"] / 1024,
                             "private_mib": m["private_kib"] / 1024, "ok": 1})
        write_csv(f"{self.results}/boot-footprint.csv", rows)
        return rows


def write_csv(path, rows):
    keys = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in r.items()})


def fs_type(path):
    """The file system type of the mount holding path ("" when unknown)."""
    best, kind = "", ""
    real = os.path.realpath(path)
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 2 and (real == parts[1] or real.startswith(parts[1].rstrip("/") + "/")) \
                    and len(parts[1]) >= len(best):
                best, kind = parts[1], parts[2]
    return kind


def main():
    build, results = sys.argv[1], sys.argv[2]
    os.makedirs(results, exist_ok=True)
    b = Bench(build, results)
    host = vms.host_line()
    exits = b.perf_out is not None
    start = time.time()
    print(f"bench: {host}", flush=True)
    try:
        b.setup()
        rows = b.storage()
        sat = [r["iops"] for r in rows if r["ok"] and r["system"] == "lvmm isolated"
               and r["rw"] == "randread"]
        if b.only in ("", "vms"):
            b.scale(max(sat) if sat else None)
        if not b.only:
            b.boot()
    finally:
        b.cleanup()
    json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(start)), "host": host,
               "duration_s": int(time.time() - start), "bench_time_s": b.secs,
               "load_at_end": " ".join(open("/proc/loadavg").read().split()[:3]),
               "rounds": b.rounds, "vol_mb": b.vol_mb, "kvm_exit_counters": exits,
               "commit": subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)),
                                         "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True).stdout.strip() or os.environ.get("COMMIT"),
               "qemu": subprocess.run([QEMU, "--version"], capture_output=True,
                                      text=True).stdout.split("\n")[0] if QEMU else None,
               "command": os.environ.get("BENCH_COMMAND", "tools/bench/storage.py " +
                                         " ".join(sys.argv[1:]))},
              open(f"{results}/storage{'-' + b.only if b.only else ''}-host.json", "w"), indent=1)


if __name__ == "__main__":
    main()
