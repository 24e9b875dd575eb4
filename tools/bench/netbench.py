#!/usr/bin/python3
# virtio-net and Linux boot side by side (a benchmark, not a test), in a network namespace of its
# own (no host interface is touched): one persistent tap, lvbench0, with the host side's address,
# that lvmm's virtio-net (--net tap=lvbench0) and QEMU's user-space virtio-net (-netdev
# tap,vhost=off -device virtio-net-pci on microvm) open in turn. Both boot the same Linux test
# kernel and initramfs (build/guest), to which an overlay adds tools/guest/net-bench and a
# /lvmm-tests script that runs it: guest -> host and host -> guest TCP streams and a 1-byte
# request/response with one outstanding, timed on the host (the servers below). Rounds are
# interleaved lvmm/QEMU, the order swapped each round; a row of net-bench run on the host
# against the same servers over loopback shows the harness's own ceiling. Also per boot:
# seconds to the first console output and to the kernel's "Run /init", the tap's frames, the
# CPU of the thread that moves the frames (lvmm's lvmm-net0; QEMU's main loop, which runs
# virtio-net without vhost) and the busy shares of it and of the vCPU thread.
# Then boots of lvmm with --disk, --net and --vsock (and --fs on virtiofsd where this lvmm has
# virtio-fs) against the same boot without devices.
# usage: netbench.py BUILD RESULTS   knobs (environment): NET_ROUNDS (3), NET_SECS (5 s per
#   stream and request/response phase), NET_BOOTS (2: boots per device shape), NET_LIMIT_S (300
#   per boot), NET_ONLY (net or boot: one part; loop: net-bench run on the host against the
#   servers, no VM, a check of the harness in a second for make bench-smoke), GUEST_DIR
#   (BUILD/guest)
# Results: RESULTS/net.csv, RESULTS/net-boot.csv, RESULTS/net-host.json (report_net.py).
import csv
import ctypes
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

QEMU = shutil.which("qemu-system-x86_64")
VIRTIOFSD = "/usr/lib/qemu/virtiofsd"
TAP = "lvbench0"
HOST_IP, GUEST_IP = "192.168.78.1", "192.168.78.2"
MAC = "52:54:00:12:34:56"
PORT = 5201
CLONE_NEWNET = 0x40000000

GUEST_SCRIPT = f"""# make bench's virtio-net phases (tools/bench/netbench.py), sourced by /init
b=/bin/busybox
secs=5
for w in $cmdline; do
	case $w in netbench.secs=*) secs=${{w#netbench.secs=}} ;; esac
done
$b ip link set lo up
$b ip link set eth0 up
$b ip addr add {GUEST_IP}/24 dev eth0
/bin/net-bench {HOST_IP} {PORT} $secs
return $?
"""


def sh(cmd):
    subprocess.run(cmd, shell=True, check=True)


def netns():
    """This process into a new network namespace with lo up and the persistent tap addressed."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        sys.exit(f"netbench: unshare(CLONE_NEWNET): {os.strerror(ctypes.get_errno())} "
                 "(needs root)")
    sh("ip link set lo up")
    sh(f"ip tuntap add dev {TAP} mode tap")
    sh(f"ip addr add {HOST_IP}/24 dev {TAP} && ip link set {TAP} up")


def tap_frames():
    """Frames both ways on the tap (/proc/net/dev: /sys still shows the old namespace)."""
    for line in open("/proc/net/dev"):
        name, _, rest = line.partition(":")
        if name.strip() == TAP:
            f = rest.split()
            return int(f[1]) + int(f[9])
    return 0


def thread_cpu_s(pid, want):
    """CPU seconds of pid's thread whose comm starts with want (None: the main thread)."""
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            comm = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            if (want is None and tid == str(pid)) or (want and comm.startswith(want)):
                st = open(f"/proc/{pid}/task/{tid}/stat").read()
                f = st[st.rindex(")") + 2:].split()
                return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        pass
    return None


class Servers:
    """The host side: three listeners, one connection at a time each; results per boot."""

    def __init__(self, secs):
        self.secs = secs
        self.res, self.pid, self.thread_name, self.vcpu_name = {}, None, None, None
        self.lock = threading.Lock()
        for i, fn in enumerate((self.tx, self.rx, self.rr)):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((HOST_IP, PORT + i))
            s.listen(4)
            threading.Thread(target=self.serve, args=(s, fn), daemon=True).start()

    def arm(self, pid, thread_name, vcpu_name):
        with self.lock:
            self.res, self.pid, self.thread_name = {}, pid, thread_name
            self.vcpu_name = vcpu_name

    def sample(self, key):
        self.res[key] = (time.monotonic(), thread_cpu_s(self.pid, self.thread_name),
                         tap_frames(),
                         thread_cpu_s(self.pid, self.vcpu_name) if self.vcpu_name else None)

    def serve(self, s, fn):
        while True:
            c, _ = s.accept()
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                fn(c)
            except OSError as e:
                self.res[f"error_{fn.__name__}"] = str(e)
            finally:
                c.close()

    def tx(self, c):  # guest -> host
        self.sample("tx0")
        n = 0
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            n += len(b)
        self.sample("tx1")
        self.res["tx_bytes"] = n

    def rx(self, c):  # host -> guest
        self.sample("rx0")
        buf = b"\xa5" * (1 << 16)
        t0 = time.monotonic()
        while time.monotonic() - t0 < self.secs:
            c.sendall(buf)
        c.shutdown(socket.SHUT_WR)
        got = b""
        while len(got) < 8:
            b = c.recv(8 - len(got))
            if not b:
                break
            got += b
        self.sample("rx1")
        self.res["rx_bytes"] = struct.unpack("!Q", got)[0] if len(got) == 8 else None

    def rr(self, c):  # request/response, one outstanding
        self.sample("rr0")
        n = 0
        while True:
            b = c.recv(1)
            if not b:
                break
            c.sendall(b)
            n += 1
        self.sample("rr1")
        self.res["rr_n"] = n


class Reaper:
    """Kills the VMM when the bench itself is interrupted or killed (SIGTERM: see main)."""

    def __init__(self, p):
        self.p = p

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.p.poll() is None and exc[0] is not None:
            self.p.kill()
            self.p.wait()


def boot(argv, limit_s, log, on_start=None, quiet_s=120):
    """Console text, seconds to the first output, to "Run /init" and to the exit. Killed after
    limit_s, or after quiet_s without a console byte."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if on_start:
        on_start(p.pid)
    first = init = None
    out = []
    timer = threading.Timer(limit_s, p.kill)
    timer.start()
    quiet = threading.Timer(quiet_s, lambda: first is None and out == [] and p.kill())
    quiet.start()
    with open(log, "wb") as f, Reaper(p):
        for line in iter(p.stdout.readline, b""):
            t = time.monotonic() - t0
            if first is None and line.strip():
                first = t
            if init is None and b"Run /init" in line:
                init = t
            if b"KVM internal error" in line:  # QEMU pauses the VM there: nothing more comes
                threading.Timer(1, p.kill).start()
            out.append(line)
            f.write(line)
    p.wait()
    timer.cancel()
    quiet.cancel()
    wall = time.monotonic() - t0
    if not out:
        out.append(f"(no console output; ended after {wall:.0f} s)".encode())
    return b"".join(out).decode(errors="replace"), first, init, wall


def per_s(res, phase, val):
    a, b = res.get(f"{phase}0"), res.get(f"{phase}1")
    if not a or not b or val is None or b[0] <= a[0]:
        return None
    return val / (b[0] - a[0])


class NetBench:
    def __init__(self, build, results):
        self.build, self.results = build, results
        guest = os.environ.get("GUEST_DIR", f"{build}/guest")
        self.kernel = f"{guest}/vmlinux"
        self.base_cpio = f"{guest}/initramfs.cpio"
        self.gen = f"{guest}/gen_init_cpio"
        self.client = f"{guest}/net-bench"
        self.rootfs = f"{guest}/rootfs.img"
        self.rounds = int(os.environ.get("NET_ROUNDS", "3"))
        self.secs = float(os.environ.get("NET_SECS", "5"))
        self.boots = int(os.environ.get("NET_BOOTS", "2"))
        self.limit = float(os.environ.get("NET_LIMIT_S", "300"))
        self.only = os.environ.get("NET_ONLY", "")
        self.dir = tempfile.mkdtemp(prefix="lvmm-netbench-", dir="/var/tmp")
        self.cpio = f"{self.dir}/netbench.cpio"

    def overlay(self):
        """The test guest's initramfs and, after it, a second archive with the bench's files."""
        script = f"{self.dir}/netbench.sh"
        with open(script, "w") as f:
            f.write(GUEST_SCRIPT)
        lst = f"{self.dir}/list"
        with open(lst, "w") as f:
            f.write(f"file /bin/net-bench {self.client} 0755 0 0\n"
                    f"file /lvmm-tests/netbench.sh {script} 0644 0 0\n")
        extra = subprocess.run([self.gen, lst], check=True, capture_output=True).stdout
        with open(self.cpio, "wb") as f:
            f.write(open(self.base_cpio, "rb").read())
            f.write(extra)

    def vmms(self):
        # the host row: net-bench itself against the servers over loopback, the harness's ceiling
        host = {"host (no VM)": ([self.client, HOST_IP, str(PORT), f"{self.secs:g}"], None, None)}
        if self.only == "loop":
            return host
        cl = f"console=ttyS0 lvmm.test=netbench netbench.secs={self.secs:g}"
        v = {"lvmm": ([f"{self.build}/lvmm", "run", "--kernel", self.kernel, "--initramfs",
                       self.cpio, "--memory", "256M", "--cpus", "1", "--net",
                       f"tap={TAP},mac={MAC}", "--cmdline", cl], "lvmm-net0", "vcpu0")}
        if QEMU:
            # vmlinux through its PVH note with the CPU features kvm_pvm cannot emulate in guest
            # ring 0 off (lvmm's own cmdline additions, docs/benchmarks.md "Noise and limits")
            off = "cx16,smap,ssse3,popcnt,erms,fsrm"
            v["QEMU"] = ([QEMU, "-name", "netbench,debug-threads=on", "-machine",
                          "microvm,accel=kvm,pcie=on,pit=off,pic=off,rtc=off", "-cpu",
                          "host,-arch-capabilities,-xsave,-xsaves,-xsavec,-xsaveopt,-fsgsbase," +
                          ",".join("-" + f for f in off.split(",")), "-m", "256M", "-smp", "1",
                          "-nographic", "-nodefaults", "-serial", "stdio", "-no-reboot",
                          "-kernel", self.kernel, "-initrd", self.cpio, "-append",
                          f"{cl} noxsave clearcpuid={off} nosmap nofsgsbase",
                          "-netdev", f"tap,id=n0,ifname={TAP},script=no,downscript=no,vhost=off",
                          "-device", f"virtio-net-pci,netdev=n0,mac={MAC}"], None, "CPU 0/KVM")
        v.update(host)
        return v

    def net(self):
        srv = Servers(self.secs)
        rows = []
        names = list(self.vmms())
        for rnd in range(1, self.rounds + 1):
            order = names if rnd % 2 else names[::-1]
            for name in order:
                argv, tname, vname = self.vmms()[name]
                text, first, init, wall = boot(
                    argv, self.limit, f"{self.dir}/{name}-{rnd}.log",
                    lambda pid, t=tname, v=vname: srv.arm(pid, t, v))
                for _ in range(20):  # the servers' last phase may end just after the VMM
                    if "rr1" in srv.res or any(k.startswith("error") for k in srv.res):
                        break
                    time.sleep(0.1)
                r = srv.res
                row = {"round": rnd, "vmm": name, "first_output_s": first, "run_init_s": init,
                       "wall_s": wall,
                       "tx_mib_s": per_s(r, "tx", r.get("tx_bytes")),
                       "rx_mib_s": per_s(r, "rx", r.get("rx_bytes")),
                       "rr_per_s": per_s(r, "rr", r.get("rr_n")),
                       "ok": int("LVMM-NETBENCH-DONE rc=0" in text)}
                for k in ("tx", "rx"):
                    if row[f"{k}_mib_s"] is not None:
                        row[f"{k}_mib_s"] /= 1 << 20
                a, b = r.get("tx0"), r.get("rr1")
                if a and b and a[1] is not None and b[1] is not None and b[2] > a[2]:
                    row["frames"] = b[2] - a[2]
                    row["io_cpu_s"] = b[1] - a[1]
                    row["io_cpu_us_per_frame"] = (b[1] - a[1]) * 1e6 / (b[2] - a[2])
                    # busy shares of the window: which side waits
                    row["window_s"] = b[0] - a[0]
                    row["io_busy_pct"] = (b[1] - a[1]) * 100 / (b[0] - a[0])
                    if a[3] is not None and b[3] is not None:
                        row["vcpu_busy_pct"] = (b[3] - a[3]) * 100 / (b[0] - a[0])
                if not row["ok"]:
                    lines = [x for x in text.strip().split("\n") if x.strip()]
                    tail = [x for x in lines if "internal error" in x or "Code=" in x][:2] or \
                        lines[-3:]
                    row["note"] = " / ".join(t.strip()[:120] for t in tail)
                rows.append(row)
                print("netbench: round {round} {vmm}: init {i} s, tx {tx} MiB/s, rx {rx} MiB/s, "
                      "rr {rr}/s, {cpu} us CPU/frame, vCPU busy {vb} %{bad}".format(
                          i=fmt(init), tx=fmt(row["tx_mib_s"], 3), rx=fmt(row["rx_mib_s"], 3),
                          rr=fmt(row["rr_per_s"], 1), cpu=fmt(row.get("io_cpu_us_per_frame")),
                          vb=fmt(row.get("vcpu_busy_pct")),
                          bad="" if row["ok"] else " FAILED: " + row.get("note", ""), **row),
                      flush=True)
        write_csv(f"{self.results}/net.csv", rows)

    def virtiofsd(self):
        """A virtiofsd serving a small directory for one boot (it ends with its client), or
        None when it did not make its socket."""
        share, sock = f"{self.dir}/share", f"{self.dir}/fs.sock"
        os.makedirs(share, exist_ok=True)
        if os.path.exists(sock):
            os.unlink(sock)
        p = subprocess.Popen([VIRTIOFSD, f"--socket-path={sock}", "-o", f"source={share}", "-o",
                              "cache=none"], stdout=subprocess.DEVNULL,
                             stderr=open(f"{self.dir}/virtiofsd.log", "a"))
        for _ in range(100):
            if os.path.exists(sock):
                return p
            time.sleep(0.05)
        p.kill()
        p.wait()
        return None

    def boot_shapes(self):
        disk = f"{self.dir}/disk.img"
        shutil.copyfile(self.rootfs, disk)
        lvmm = f"{self.build}/lvmm"
        base = [lvmm, "run", "--kernel", self.kernel, "--initramfs", self.base_cpio, "--memory",
                "256M", "--cpus", "1", "--cmdline", "console=ttyS0"]
        devs = ["--disk", f"path={disk}", "--net", f"tap={TAP},mac={MAC}", "--vsock",
                f"cid=3,socket={self.dir}/vsock.sock"]
        shapes = {"no devices": [], "--disk, --net, --vsock": devs}
        # --fs (virtio-fs with virtiofsd as its back end) where this lvmm has it
        usage = subprocess.run([lvmm, "run", "--help"], capture_output=True, text=True)
        has_fs = "--fs" in usage.stdout + usage.stderr
        fs_note = None
        if not has_fs:
            fs_note = "not measured: this lvmm has no --fs"
        elif not os.path.exists(VIRTIOFSD):
            fs_note = f"not measured: no {VIRTIOFSD}"
        else:
            shapes["--disk, --net, --vsock, --fs"] = devs + [
                "--fs", f"tag=bench,socket={self.dir}/fs.sock"]
        rows = []
        for rnd in range(1, self.boots + 1):
            for name, extra in (shapes.items() if rnd % 2 else list(shapes.items())[::-1]):
                fsd = self.virtiofsd() if "--fs" in extra else None
                if "--fs" in extra and not fsd:
                    rows.append({"round": rnd, "shape": name, "ok": 0,
                                 "note": "virtiofsd made no socket"})
                    continue
                text, first, init, wall = boot(base + extra, self.limit,
                                               f"{self.dir}/boot-{rnd}.log")
                if fsd:
                    fsd.kill()
                    fsd.wait()
                ok = int("LVMM-GUEST-UP" in text)
                rows.append({"round": rnd, "shape": name, "first_output_s": first,
                             "run_init_s": init, "wall_s": wall, "ok": ok})
                print(f"netbench: boot {rnd} {name}: first output {fmt(first, 2)} s, Run /init "
                      f"{fmt(init)} s, exit {wall:.1f} s{'' if ok else ' FAILED'}", flush=True)
        if fs_note:
            rows.append({"round": 0, "shape": "--disk, --net, --vsock, --fs", "ok": 0,
                         "note": fs_note})
        write_csv(f"{self.results}/net-boot.csv", rows)

    def run(self):
        os.makedirs(self.results, exist_ok=True)
        need = [self.client]
        if self.only != "loop":
            need += [self.kernel, self.base_cpio, self.gen, self.rootfs]
        for f in need:
            if not os.path.exists(f):
                sys.exit(f"netbench: no {f} (make guest)")
        load0 = open("/proc/loadavg").read().split()[:3]
        t0 = time.time()
        netns()
        if self.only != "loop":
            self.overlay()
        if self.only in ("", "net", "loop"):
            self.net()
        if self.only in ("", "boot"):
            self.boot_shapes()
        host = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0)),
                "load_start": " ".join(load0),
                "load_end": " ".join(open("/proc/loadavg").read().split()[:3]),
                "duration_s": int(time.time() - t0), "rounds": self.rounds, "secs": self.secs,
                "qemu": subprocess.run([QEMU, "--version"], capture_output=True, text=True)
                .stdout.split("\n")[0] if QEMU else None,
                "lvmm": subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                       capture_output=True, text=True).stdout.strip()}
        json.dump(host, open(f"{self.results}/net-host.json", "w"), indent=1)

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def fmt(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"


def write_csv(path, rows):
    keys = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("netbench: terminated"))
    b = NetBench(sys.argv[1], sys.argv[2])
    try:
        b.run()
    finally:
        if os.environ.get("KEEP"):
            print(f"netbench: logs kept in {b.dir}")
        else:
            b.cleanup()


if __name__ == "__main__":
    main()
