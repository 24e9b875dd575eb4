#!/usr/bin/python3
# vNVMe emulate-mode QD1 bench (a benchmark, not a test): the bench guest's three ring-3 QD1
# 4 KiB read loops (plain MMIO doorbells, shadow doorbells + ioeventfd, SQ in the CMB) against
# fio with io_uring QD1 O_DIRECT on the same image from the host, interleaved round by round;
# each round also boots bench.mode=exits for the cost of one PIO and one MMIO exit right then.
# usage: nvme-qd1.py BUILD_DIR OUT_DIR [ROUNDS] [FIO_SECONDS]
#        (writes OUT_DIR/nvme-qd1.csv and OUT_DIR/exits.csv)
import csv
import glob
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

IMG_MB = 64
HZ = os.sysconf("SC_CLK_TCK")


def http_get(sock_path, endpoint):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    s.sendall(f"GET /api/v1/{endpoint} HTTP/1.1\r\nHost: localhost\r\n"
              "Connection: close\r\n\r\n".encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    clen = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            clen = int(line.split(b":")[1])
    while len(body) < clen:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    s.close()
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"{endpoint}: {head.splitlines()[0]!r}")
    return json.loads(body[:clen])


def thread_cpu_ns(pid):
    """CPU time and run-queue wait (ns) of pid's threads, summed per kind of thread."""
    out = {}
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(f"{task}/comm") as f:
                name = f.read().strip()
            with open(f"{task}/schedstat") as f:
                run_ns, wait_ns = (int(x) for x in f.read().split()[:2])
        except OSError:
            continue
        key = "vcpu" if name.startswith("vcpu") else \
            "io" if name == "lvmm-nvme-io" else "other"
        out[key] = out.get(key, 0) + run_ns
        out[key + "_wait"] = out.get(key + "_wait", 0) + wait_ns
    return out


def snapshot(pid, sock_path):
    cpu = thread_cpu_ns(pid)
    dev = http_get(sock_path, "vm.counters").get("nvme0", {})
    return {"t": time.perf_counter(), "cpu": cpu, "dev": dev}


# guest line -> (window it ends, regex for its figures)
MARKS = [
    ("bench: nvme negative ok", "start", None),
    ("bench: nvme qd1 4k read:", "mmio",
     re.compile(r"(\d+) I/Os in \d+ us, (\d+) ns/io")),
    ("bench: nvme qd1 4k read, shadow doorbells:", "shadow",
     re.compile(r"(\d+) I/Os, (\d+) ns/io, (\d+) doorbell writes per 100")),
    ("bench: nvme qd1 4k read, CMB SQ + shadow doorbells:", "shadow_cmb",
     re.compile(r"(\d+) I/Os, (\d+) ns/io, (\d+) doorbell writes per 100")),
]


def run_guest(build, img, rnd):
    d = tempfile.mkdtemp(prefix="lvmm-bench-nvme-")
    sock_path = f"{d}/api.sock"
    cmd = [f"{build}/lvmm", "run", "--kernel", f"{build}/bench-guest/bench-guest.elf",
           "--memory", "64M", "--cmdline", "bench.mode=nvme", "--vnvme", f"file={img}",
           "--api-socket", sock_path]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    snaps, figures, out = {}, {}, []
    for line in p.stdout:
        out.append(line)
        for prefix, name, rx in MARKS:
            if line.startswith(prefix):
                snaps[name] = snapshot(p.pid, sock_path)
                if rx:
                    figures[name] = [int(x) for x in rx.search(line).groups()]
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    missing = [name for _, name, _ in MARKS if name not in snaps]
    if status != 0 or missing:
        sys.exit(f"nvme-qd1: bench guest run failed (status {status}, no line for "
                 f"{missing or 'none'}):\n{''.join(out)}{err}")
    # A failed functional check is the tests' business; the loops' figures still stand.
    for line in out:
        if "FAIL" in line:
            print(f"  warning: round {rnd}: {line.strip()}", file=sys.stderr)
    try:
        os.rmdir(d)
    except OSError:
        pass
    rows, prev = [], snaps["start"]
    for _, name, rx in MARKS[1:]:
        cur = snaps[name]
        ios = cur["dev"]["read_ops"] - prev["dev"]["read_ops"]
        exits = cur["dev"]["mmio_exits"] - prev["dev"]["mmio_exits"]
        dcpu = {k: cur["cpu"].get(k, 0) - prev["cpu"].get(k, 0) for k in ("vcpu", "io", "other")}
        # Time lvmm's threads were runnable but had no CPU: the host's load, not lvmm's cost.
        wait = {k: cur["cpu"].get(k + "_wait", 0) - prev["cpu"].get(k + "_wait", 0)
                for k in ("vcpu", "io")}
        fig = figures[name]
        ns_io = fig[1]
        rows.append({
            "round": rnd, "config": name, "ios": fig[0], "us_per_io": ns_io / 1000,
            "iops": round(1e9 / ns_io) if ns_io else 0, "p50_us": "", "p99_us": "",
            "user_exits_per_io": round(exits / ios, 3) if ios else "",
            # Guest count of doorbell MMIO writes: user-space exits with plain doorbells,
            # in-kernel ioeventfd exits once shadow doorbells are on.
            "doorbell_writes_per_io": 2.0 if name == "mmio" else fig[2] / 100,
            "cpu_us_per_io": round(sum(dcpu.values()) / 1000 / ios, 1) if ios else "",
            "io_thread_cpu_us_per_io": round(dcpu["io"] / 1000 / ios, 1) if ios else "",
            "vcpu_cpu_us_per_io": round(dcpu["vcpu"] / 1000 / ios, 1) if ios else "",
            "vcpu_runq_wait_us_per_io": round(wait["vcpu"] / 1000 / ios, 1) if ios else "",
            "io_runq_wait_us_per_io": round(wait["io"] / 1000 / ios, 1) if ios else "",
        })
        prev = cur
    total_cpu = ru.ru_utime + ru.ru_stime
    print(f"  round {rnd} lvmm: " + ", ".join(
        f"{r['config']} {r['us_per_io']:.0f} us/io {r['user_exits_per_io']} exits/io "
        f"{r['cpu_us_per_io']} cpu-us/io, run-queue wait vCPU {r['vcpu_runq_wait_us_per_io']} "
        f"I/O thread {r['io_runq_wait_us_per_io']} us/io" for r in rows) +
        f"  (run {wall:.2f} s, lvmm cpu {total_cpu:.2f} s)", flush=True)
    return rows


EXIT_RX = re.compile(r"bench: (ring[03]) (pio|mmio) exit (\d+) ns")


def run_exits(build, rnd):
    cmd = [f"{build}/lvmm", "run", "--kernel", f"{build}/bench-guest/bench-guest.elf",
           "--memory", "64M", "--cmdline", "bench.mode=exits"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    row = {"round": rnd}
    for m in EXIT_RX.finditer(p.stdout):
        row[f"{m.group(1)}_{m.group(2)}_us"] = int(m.group(3)) / 1000
    if p.returncode != 0 or len(row) != 5:
        sys.exit(f"nvme-qd1: bench.mode=exits failed (status {p.returncode}):\n"
                 f"{p.stdout}{p.stderr}")
    print(f"  round {rnd} exit cost: " +
          ", ".join(f"{k[:-3]} {v:.1f} us" for k, v in row.items() if k != "round"), flush=True)
    return row


def run_fio(img, rw, secs, rnd):
    cmd = ["fio", "--name=native", f"--filename={img}", "--direct=1", "--ioengine=io_uring",
           "--bs=4k", f"--rw={rw}", "--iodepth=1", "--time_based", f"--runtime={secs}",
           "--ramp_time=0.5", f"--size={IMG_MB}M", "--lat_percentiles=1",
           "--output-format=json"]
    res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    job = res["jobs"][0]
    rd = job["read"]
    ios = rd["total_ios"]
    # Submission plus completion: io_uring may do the read inside the submit call.
    pct = rd["lat_ns"].get("percentile", {})
    # fio reports CPU as a share of the job's run time.
    cpu_s = (job["usr_cpu"] + job["sys_cpu"]) / 100 * job["job_runtime"] / 1000
    row = {
        "round": rnd, "config": f"native_{rw}", "ios": ios,
        "us_per_io": round(rd["lat_ns"]["mean"] / 1000, 1), "iops": round(rd["iops"]),
        "p50_us": round(pct.get("50.000000", 0) / 1000, 1),
        "p99_us": round(pct.get("99.000000", 0) / 1000, 1),
        "user_exits_per_io": 0, "doorbell_writes_per_io": 0,
        "cpu_us_per_io": round(cpu_s * 1e6 / ios, 1) if ios else "",
        "io_thread_cpu_us_per_io": "", "vcpu_cpu_us_per_io": "",
        "vcpu_runq_wait_us_per_io": "", "io_runq_wait_us_per_io": "",
    }
    print(f"  round {rnd} fio {rw}: {row['us_per_io']} us/io p50 {row['p50_us']} "
          f"p99 {row['p99_us']} cpu {row['cpu_us_per_io']} us/io", flush=True)
    return row


def main():
    build, out_dir = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    secs = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    d = tempfile.mkdtemp(prefix="lvmm-bench-img-", dir="/var/tmp")
    img = f"{d}/disk.img"
    # Real data, not holes: sparse reads would never reach the disk.
    with open(img, "wb") as f:
        for _ in range(IMG_MB):
            f.write(os.urandom(1 << 20))
        os.fsync(f.fileno())
    rows, exits = [], []
    try:
        for rnd in range(1, rounds + 1):
            exits.append(run_exits(build, rnd))
            rows += run_guest(build, img, rnd)
            rows += [run_fio(img, "read", secs, rnd), run_fio(img, "randread", secs, rnd)]
    finally:
        os.unlink(img)
        os.rmdir(d)
    for name, data in (("nvme-qd1", rows), ("exits", exits)):
        with open(f"{out_dir}/{name}.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(data[0].keys()))
            w.writeheader()
            w.writerows(data)


if __name__ == "__main__":
    main()
