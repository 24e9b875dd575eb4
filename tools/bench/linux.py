#!/usr/bin/python3
# make bench-linux (a benchmark, not a test): fio inside the Linux test guest on lvmm's vNVMe in
# emulate, isolated and passthrough mode, all three on the same filled softssd volume, 4 KiB random
# reads with O_DIRECT through io_uring at QD1 and QD128; one boot per mode, the modes in turn.
# Results: RESULTS/linux-fio.csv, RESULTS/linux-host.json and the table between the
# <!-- bench:linux --> markers of DOC. QEMU is tried once on the same kernel (LINUX_QEMU=1).
# fio and its libraries ride on a second, read-only vNVMe (INITRAMFS's -fio.img sibling, emulate
# mode on a file), mounted by the guest; the first is the one measured.
# usage: linux.py BUILD RESULTS DOC     knobs: BENCH_TIME (fio runtime, s: 5), LINUX_MODES
#   (emulate,isolated,passthrough), GUEST_DIR (build/guest), INITRAMFS (BUILD/bench-linux.cpio),
#   VOL_MB (1024), LINUX_LIMIT_S (900 per boot), LINUX_QEMU (1)
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vms  # noqa: E402

SSD = f"benchlinux{os.getpid()}"
VOL = "bench"
QEMU = shutil.which("qemu-system-x86_64")


def fio_blocks(text):
    """{qd: fio's JSON} from the LVMM-FIO-BEGIN/END blocks of a console log."""
    out = {}
    for m in re.finditer(r"LVMM-FIO-BEGIN qd=(\d+)\s*\n(.*?)LVMM-FIO-END qd=\d+ rc=(\d+)", text,
                         re.S):
        body = m.group(2)
        start = body.find("{")
        try:
            out[int(m.group(1))] = json.loads(body[start:body.rfind("}") + 1])
        except ValueError:
            pass
    return out


def row(mode, qd, j, boot_s, init_s):
    r = j["jobs"][0]["read"]
    p = r["clat_ns"].get("percentile", {})
    return {"system": f"lvmm {mode}", "qd": qd, "iops": r["iops"],
            "mean_us": r["clat_ns"]["mean"] / 1e3, "p50_us": p.get("50.000000", 0) / 1e3,
            "p99_us": p.get("99.000000", 0) / 1e3, "p999_us": p.get("99.900000", 0) / 1e3,
            "runtime_s": j["jobs"][0]["read"]["runtime"] / 1e3,
            "guest_usr_pct": j["jobs"][0]["usr_cpu"], "guest_sys_pct": j["jobs"][0]["sys_cpu"],
            "first_result_s": boot_s, "run_init_s": init_s}


def boot(argv, limit_s, log):
    """Console text (also written to log as it comes), wall seconds to the exit and to the
    kernel's "Run /init" line."""
    t0 = time.monotonic()
    out, init_s = [], None
    live = open(log, "w")
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         errors="replace")
    timer = threading.Timer(limit_s, p.kill)
    timer.start()
    for line in p.stdout:
        out.append(line)
        live.write(line)
        live.flush()
        if init_s is None and "Run /init" in line:
            init_s = time.monotonic() - t0
    p.wait()
    timer.cancel()
    live.close()
    wall = time.monotonic() - t0
    if wall >= limit_s:
        out.append(f"\n(killed after {limit_s} s)\n")
    return "".join(out), wall, init_s


def report(doc, rows, meta):
    lines = [f"Run {meta['date']} on {meta['host']}; {meta['duration_s']} s in all; fio "
             f"{meta['fio']}, {meta['runtime_s']} s per run after {meta['ramp_s']} s of ramp; "
             f"lvmm at {meta['commit']}. Command: `{meta['command']}`", "",
             "| system | QD | IOPS | clat mean / p50 / p99 / p99.9 us | guest CPU usr / sys % "
             "| exec to \"Run /init\" s | exec to exit s |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['system']} | {r['qd']} | {r['iops']:,.0f} | {r['mean_us']:,.0f} / "
                     f"{r['p50_us']:,.0f} / {r['p99_us']:,.0f} / {r['p999_us']:,.0f} | "
                     f"{r['guest_usr_pct']:.0f} / {r['guest_sys_pct']:.0f} | "
                     f"{r['run_init_s'] or 0:.0f} | {r['first_result_s']:.0f} |")
    for m, why in meta["failed"].items():
        lines.append(f"| {m} | - | failed: {why} | | | | |")
    lines += ["", f"QEMU on the same kernel and initramfs: {meta['qemu']}"]
    text = open(doc).read()
    a, b = "<!-- bench:linux -->", "<!-- /bench:linux -->"
    if a not in text:
        sys.stderr.write(f"bench-linux: no {a} in {doc}: table not written\n")
        return
    head, rest = text.split(a, 1)
    tail = rest.split(b, 1)[1]
    open(doc, "w").write(head + a + "\n" + "\n".join(lines) + "\n" + b + tail)


def main():
    build, results, doc = sys.argv[1], sys.argv[2], sys.argv[3]
    lvmm = f"{build}/lvmm"
    guest = os.environ.get("GUEST_DIR", "build/guest")
    kernel = f"{guest}/vmlinux"
    initrd = os.environ.get("INITRAMFS", f"{build}/bench-linux.cpio")
    secs = max(1, int(float(os.environ.get("BENCH_TIME") or "5")))
    ramp = 1
    vol_mb = int(os.environ.get("VOL_MB", "1024"))
    limit = int(os.environ.get("LINUX_LIMIT_S", "900"))
    modes = os.environ.get("LINUX_MODES", "emulate,isolated,passthrough").split(",")
    tools = initrd[:-len(".cpio")] + "-fio.img"  # fio and its libraries (build-bench-initramfs.sh)
    for f in (lvmm, kernel, initrd, tools, f"{build}/softssd-bench-client"):
        if not os.path.exists(f):
            sys.exit(f"bench-linux: no {f} (make bench-linux builds it; the guest: make guest)")
    os.makedirs(results, exist_ok=True)
    d = tempfile.mkdtemp(prefix="lvmm-bench-linux-", dir=os.environ.get("DIR", "/var/tmp"))
    os.environ["LVMM_RUN_DIR"] = d
    os.environ["LVMM_STATE_DIR"] = "/proc/lvmm-none"
    host = vms.host_line()
    start = time.time()
    print(f"bench-linux: {host}; consoles in {d}", flush=True)
    cl = (f"console=ttyS0 lvmm.test=fio fio.qd=1,128 fio.runtime={secs} fio.ramp={ramp}")
    rows, failed, daemon = [], {}, None
    try:
        daemon = vms.start_daemon(lvmm, SSD, f"{d}/ssd.img", vol_mb + 64, "none",
                                  f"{d}/ssd.log", ["--max-clients", "16"])
        subprocess.run([f"{build}/softssd-bench-client", SSD, VOL, str(vol_mb), "--fill"],
                       check=True, stdout=subprocess.DEVNULL)
        for mode in modes:
            argv = [lvmm, "run", "--kernel", kernel, "--initramfs", initrd, "--memory", "1G",
                    "--vnvme", f"{SSD},vol={VOL},readonly=on,mode={mode}",
                    "--vnvme", f"file={tools},readonly=on", "--cmdline", cl]
            text, wall, init_s = boot(argv, limit, f"{d}/{mode}.log")
            got = fio_blocks(text)
            for qd in sorted(got):
                rows.append(row(mode, qd, got[qd], wall, init_s))
            if not got:
                tail = [x for x in text.strip().split("\n") if x.strip()][-3:]
                failed[f"lvmm {mode}"] = " / ".join(t.strip()[:160] for t in tail)
            print(f"bench-linux: lvmm {mode}: {len(got)} fio runs in {wall:.0f} s: " +
                  ", ".join(f"QD{r['qd']} {r['iops']:.0f} IOPS p50 {r['p50_us']:.0f} us"
                            for r in rows if r["system"] == f"lvmm {mode}"), flush=True)
        qemu = "not tried (LINUX_QEMU=0)"
        if QEMU and os.environ.get("LINUX_QEMU", "1") == "1":
            argv = [QEMU, "-machine", "microvm,accel=kvm,pcie=on,pit=off,pic=off,rtc=off",
                    "-cpu", "host,-arch-capabilities,-xsave,-xsaves,-xsavec,-xsaveopt",
                    "-m", "1G", "-nographic", "-nodefaults", "-serial", "stdio", "-no-reboot",
                    "-kernel", f"{guest}/bzImage" if os.path.exists(f"{guest}/bzImage")
                    else kernel, "-initrd", initrd, "-append",
                    cl + " noxsave", "-drive", f"file={d}/ssd.img,if=none,id=d0,format=raw,"
                    "readonly=on", "-device", "nvme,drive=d0,serial=bench",
                    "-drive", f"file={tools},if=none,id=d1,format=raw,readonly=on",
                    "-device", "nvme,drive=d1,serial=tools"]
            text, wall, init_s = boot(argv, 180, f"{d}/qemu.log")
            got = fio_blocks(text)
            for qd in sorted(got):
                r = row("x", qd, got[qd], wall, init_s)
                r["system"] = "QEMU nvme"
                rows.append(r)
            lines = [x.strip() for x in text.strip().split("\n") if x.strip()]
            err = [x for x in lines if "error" in x.lower() or "Code=" in x or "int3" in x]
            qemu = (f"{len(got)} fio runs; `-cpu host,-arch-capabilities,-xsave,-xsaves,-xsavec,"
                    f"-xsaveopt` and the kernel's `noxsave` on microvm, {wall:.0f} s, last console "
                    f"lines: " + " / ".join(f"`{x[:140]}`" for x in (err[:2] + lines[-2:])))
            print(f"bench-linux: QEMU: {qemu}", flush=True)
    finally:
        vms.stop(daemon)
        if not os.environ.get("KEEP"):
            shutil.rmtree(d, ignore_errors=True)
        else:
            print(f"bench-linux: logs kept in {d}")
    keys = ["system", "qd", "iops", "mean_us", "p50_us", "p99_us", "p999_us", "runtime_s",
            "guest_usr_pct", "guest_sys_pct", "run_init_s", "first_result_s"]
    # LINUX_KEEP=1: rows of the modes not run this time stay from the last run (one boot per
    # mode can take ten minutes here, so the modes may be run apart)
    if os.environ.get("LINUX_KEEP") == "1" and os.path.exists(f"{results}/linux-fio.csv"):
        ran = {r["system"] for r in rows} | set(failed)
        with open(f"{results}/linux-fio.csv") as f:
            old = [dict(zip(keys, x.rstrip("\n").split(","))) for x in list(f)[1:]]
        for r in old:
            if r["system"] not in ran and r["system"] != "QEMU nvme":
                for k in keys[1:]:
                    r[k] = int(r[k]) if k == "qd" else (float(r[k]) if r[k] else None)
                rows.append(r)
        rows.sort(key=lambda r: (r["system"], r["qd"]))
    with open(f"{results}/linux-fio.csv", "w") as f:
        f.write(",".join(keys) + "\n")
        for r in rows:
            f.write(",".join(f"{r[k]:.4g}" if isinstance(r[k], float) else
                             ("" if r[k] is None else str(r[k])) for k in keys) + "\n")
    fio = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(start)), "host": host,
            "duration_s": int(time.time() - start), "fio": fio, "runtime_s": secs,
            "ramp_s": ramp, "failed": failed, "qemu": qemu,
            "load_at_end": " ".join(open("/proc/loadavg").read().split()[:3]),
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True).stdout.strip(),
            "command": os.environ.get("BENCH_COMMAND", f"make bench-linux BENCH_TIME={secs}")}
    json.dump(meta, open(f"{results}/linux-host.json", "w"), indent=1)
    report(doc, rows, meta)


if __name__ == "__main__":
    main()
