#!/usr/bin/python3
# Shared by the storage benchmarks: starting lvmm, QEMU and the native softssd client against the
# same backing, reading the guest's "bench: work" lines, and the host-side counters taken between
# them (CPU per thread from /proc, VM exits from KVM's debugfs, lvmm's LVMM_STATS at exit).
import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

HZ = os.sysconf("SC_CLK_TCK")


def host_line():
    kvm = "kvm"
    for mod, name in (("kvm_intel", "kvm_intel"), ("kvm_amd", "kvm_amd"),
                      ("kvm_pvm", "kvm_pvm (nested, software)")):
        if os.path.isdir(f"/sys/module/{mod}"):
            kvm = name
    cpu = "unknown CPU"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = int(open("/proc/meminfo").readline().split()[1]) / 1048576
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    return (f"{cpu}, {os.cpu_count()} CPUs, {mem:.0f} GiB, Linux {os.uname().release}, {kvm}, "
            f"load average {load} at start")


PERF = shutil.which("perf")
PERF_EVENTS = ["kvm:kvm_pio", "kvm:kvm_mmio", "kvm:kvm_fast_mmio", "kvm:kvm_userspace_exit"]


def perf_ready():
    """KVM's tracepoints through perf (kvm_exit and KVM's debugfs counters do not work on every
    host: kvm_pvm fires no kvm_exit and debugfs refuses reads there)."""
    if not PERF:
        return False
    r = subprocess.run([PERF, "stat", "-x", ",", "-e", "kvm:kvm_pio", "true"],
                       capture_output=True, text=True)
    return r.returncode == 0


class Exits:
    """Device-access exits (port I/O, MMIO in the kernel or ioeventfd) and exits to the VMM's
    user space of one process, counted by perf between start() and stop()."""

    def __init__(self, pid, path):
        self.path = path
        self.p = subprocess.Popen([PERF, "stat", "-x", ",", "-o", path, "-e",
                                   ",".join(PERF_EVENTS), "-p", str(pid)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return None
        n = {}
        for line in open(self.path):
            f = line.strip().split(",")
            if len(f) > 2 and f[2] in PERF_EVENTS and f[0].isdigit():
                n[f[2]] = int(f[0])
        if len(n) != len(PERF_EVENTS):
            return None
        return (n["kvm:kvm_pio"] + n["kvm:kvm_mmio"] + n["kvm:kvm_fast_mmio"],
                n["kvm:kvm_userspace_exit"])


def thread_cpu(pid):
    """CPU seconds of pid's threads, split: (vCPU threads, the others)."""
    vcpu = other = 0.0
    for t in glob.glob(f"/proc/{pid}/task/*"):
        try:
            comm = open(f"{t}/comm").read().strip()
            f = open(f"{t}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        s = (int(f[11]) + int(f[12])) / HZ
        if re.match(r"vcpu\d+$", comm) or re.match(r"CPU \d+/KVM$", comm):
            vcpu += s
        else:
            other += s
    return vcpu, other


def proc_cpu(pid):
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(f[11]) + int(f[12])) / HZ


def memory(pid):
    """RSS, PSS and private (clean + dirty) KiB of pid from smaps_rollup."""
    out = {}
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            k, _, v = line.partition(":")
            if k in ("Rss", "Pss", "Private_Clean", "Private_Dirty"):
                out[k] = int(v.split()[0])
    except OSError:
        return None
    return {"rss_kib": out.get("Rss", 0), "pss_kib": out.get("Pss", 0),
            "private_kib": out.get("Private_Clean", 0) + out.get("Private_Dirty", 0)}


class Snap:
    """Host-side counters at one moment: VMM threads, backend daemon."""

    def __init__(self, vmm_pid, daemon_pid):
        self.t = time.perf_counter()
        self.vcpu, self.other = thread_cpu(vmm_pid) if vmm_pid else (0.0, 0.0)
        self.daemon = proc_cpu(daemon_pid) if daemon_pid else 0.0


def deltas(a, b, ios, exits):
    """Per-I/O figures between two snapshots (microseconds of CPU, exits as counts)."""
    ios = max(ios, 1)
    d = {"vcpu_us": (b.vcpu - a.vcpu) * 1e6 / ios, "vmm_us": (b.other - a.other) * 1e6 / ios,
         "backend_us": (b.daemon - a.daemon) * 1e6 / ios,
         "wall_s": b.t - a.t}
    if exits:
        d["exits"] = exits[0] / ios
        d["user_exits"] = exits[1] / ios
    return d


RESULT = re.compile(r"bench: work result \S+ (.*)")


def parse_result(line):
    m = RESULT.search(line)
    if not m:
        return None
    out = {}
    for tok in m.group(1).split():
        k, _, v = tok.partition("=")
        if v.isdigit():
            out[k] = int(v)
    # a line that another writer broke into is not a result
    need = ("ios", "iops", "mean_ns", "p50_ns", "p99_ns", "p999_ns", "reads", "writes")
    return out if all(k in out for k in need) else None


def run_guest(argv, daemon_pid, limit_s, perf_out=None, env=None):
    """Runs a VMM (lvmm or QEMU) whose guest runs bench.mode=work; snapshots at the guest's
    "work start" and "work result" lines. Returns (result dict, deltas, stdout+stderr text)."""
    # the VMM's own lines apart: lvmm's serial writer thread can flush the guest's last line
    # after lvmm printed its exit message, and one line broke into the other
    err = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=env, text=True,
                         errors="replace")
    out, res, a, b, ex, counts = [], None, None, None, None, None
    deadline = time.monotonic() + limit_s
    try:
        for line in p.stdout:
            out.append(line)
            if "bench: work start" in line:
                a = Snap(p.pid, daemon_pid)
                if perf_out:
                    ex = Exits(p.pid, perf_out)
            elif "bench: work end" in line:
                b = Snap(p.pid, daemon_pid)
                if ex:
                    counts = ex.stop()
                    ex = None
            elif "bench: work result" in line:
                res = parse_result(line)
            if time.monotonic() > deadline:
                p.kill()
                break
        p.wait(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    if ex:
        ex.stop()
    err.seek(0)
    text = "".join(out) + err.read()
    err.close()
    if res is None or a is None or b is None:
        return None, None, text
    ios = res.get("reads", 0) + res.get("writes", 0)
    return res, deltas(a, b, ios, counts), text


def lvmm_stat(text, key):
    """A counter of lvmm's LVMM_STATS vnvme line ('wake-ups 12')."""
    m = re.search(r"lvmm: vnvme \S+: mode .*?\b" + re.escape(key) + r" (\d+)", text)
    return int(m.group(1)) if m else None


def start_daemon(lvmm, name, backing, size_mb, model, log, extra=()):
    env = dict(os.environ)
    p = subprocess.Popen([lvmm, "ssd", "serve", name, "--backing", backing, "--size",
                          f"{size_mb}M", "--model", model, *extra],
                         stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
    sock = f"{os.environ['LVMM_RUN_DIR']}/ssd/{name}.sock"
    for _ in range(200):
        if os.path.exists(sock):
            return p
        time.sleep(0.05)
    p.kill()
    raise SystemExit(f"bench: softssd {name} did not start: {open(log).read()}")


def stop(p):
    if p and p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
