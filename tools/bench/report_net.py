#!/usr/bin/python3
# Tables and plot of netbench.py: docs/bench/net.png and the tables of docs/benchmarks.md between
# <!-- bench:net-host -->, <!-- bench:net --> and <!-- bench:net-boot --> markers. Medians over
# rounds with the min-max spread.  usage: report_net.py RESULTS_DIR DOC_MD
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_storage import fmt, load, med, num, replace  # noqa: E402

METRICS = [("tx_mib_s", "guest -> host MiB/s", 3), ("rx_mib_s", "host -> guest MiB/s", 3),
           ("rr_per_s", "request/response per s", 1),
           ("io_cpu_us_per_frame", "I/O thread CPU us/frame", 1),
           ("io_busy_pct", "I/O thread busy %", 1), ("vcpu_busy_pct", "vCPU thread busy %", 0),
           ("run_init_s", "exec to \"Run /init\" s", 1)]


def spread(xs, digits):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    if med(xs) >= 100:
        digits = 0
    return f"{fmt(med(xs), digits)} ({fmt(min(xs), digits)}-{fmt(max(xs), digits)})"


def net_table(rows, qemu):
    vmms = list(dict.fromkeys(r["vmm"] for r in rows))
    out = ["| VMM | boots ok | " + " | ".join(m[1] for m in METRICS) + " |",
           "|" + "---|" * (2 + len(METRICS))]
    for v in vmms:
        rs = [r for r in rows if r["vmm"] == v]
        ok = sum(int(r["ok"]) for r in rs)
        out.append(f"| {v} | {ok}/{len(rs)} | " +
                   " | ".join(spread([num(r.get(k)) for r in rs if int(r["ok"])], d)
                              for k, _, d in METRICS) + " |")
    for v in vmms:
        notes = list(dict.fromkeys(r.get("note") for r in rows if r["vmm"] == v
                                   and not int(r["ok"]) and r.get("note")))
        if notes:
            out.append("")
            out.append(f"{v}: {sum(not int(r['ok']) for r in rows if r['vmm'] == v)} boot(s) "
                       "ended before the guest program finished; the console's end: " +
                       "; ".join(f"`{n}`" for n in notes[:2]))
    if not qemu:
        out.insert(2 + len(vmms), "| QEMU | - | qemu-system-x86_64 absent: not measured |" +
                   " |" * (len(METRICS) - 1))
    return "\n".join(out)


def boot_table(rows):
    out = ["| lvmm, Linux test kernel and initramfs | boots ok | first output s | "
           "\"Run /init\" s | exit s |", "|---|---|---|---|---|"]
    for s in dict.fromkeys(r["shape"] for r in rows):
        every = [r for r in rows if r["shape"] == s]
        rs = [r for r in every if int(r["ok"])]
        notes = list(dict.fromkeys(r["note"] for r in every if r.get("note")))
        if not rs and notes:
            out.append(f"| {s} | - | {'; '.join(notes)} | | |")
            continue
        out.append(f"| {s} | {len(rs)}/{len(every)} | " +
                   " | ".join(spread([num(r[k]) for r in rs], d) for k, d in
                              (("first_output_s", 2), ("run_init_s", 1), ("wall_s", 1))) + " |")
    return "\n".join(out)


def net_plot(rows, path):
    vmms = list(dict.fromkeys(r["vmm"] for r in rows))
    fig, axes = plt.subplots(1, 4, figsize=(13, 3.2))
    for ax, (k, label, _) in zip(axes, METRICS[:4]):
        for i, v in enumerate(vmms):
            xs = [num(r.get(k)) for r in rows if r["vmm"] == v and int(r["ok"])]
            xs = [x for x in xs if x is not None]
            if not xs:
                ax.text(i, 0.5, "not\nmeasured", transform=ax.get_xaxis_transform(),
                        ha="center", fontsize=7)
                continue
            m = med(xs)
            ax.bar(i, m, color=("tab:blue", "tab:orange", "tab:gray")[i % 3],
                   yerr=[[m - min(xs)], [max(xs) - m]], capsize=4)
            ax.plot([i] * len(xs), xs, "k.", ms=4)
        ax.set_xticks(range(len(vmms)))
        ax.set_xticklabels(vmms)
        ax.set_title(label, fontsize=9)
        if k != "io_cpu_us_per_frame":
            ax.set_yscale("log")
    fig.suptitle("virtio-net, Linux guest on a tap (host: no VM, over loopback): median, min-max "
                 "and each round (log scale)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main():
    res, doc_path = sys.argv[1], sys.argv[2]
    host = json.load(open(f"{res}/net-host.json"))
    doc = open(doc_path).read()
    doc = replace(doc, "net-host", (
        f"Run {host['date']} on this host, load average {host['load_start']} at the start, "
        f"{host['load_end']} at the end; {host['duration_s']} s in all, {host['rounds']} rounds "
        f"of {host['secs']:g} s per phase; {host.get('qemu') or 'no QEMU'}; lvmm at "
        f"{host.get('lvmm') or 'an unknown commit'}."))
    rows = load(f"{res}/net.csv")
    if rows:
        doc = replace(doc, "net", net_table(rows, host.get("qemu")))
        net_plot(rows, f"{res}/net.png")
    rows = load(f"{res}/net-boot.csv")
    if rows:
        doc = replace(doc, "net-boot", boot_table(rows))
    open(doc_path, "w").write(doc)


if __name__ == "__main__":
    main()
