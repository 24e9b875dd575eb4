#!/usr/bin/python3
# Tables and plot of snapbench.py: docs/bench/snapshot.png and the tables of docs/benchmarks.md
# between <!-- bench:snapshot-host -->, <!-- bench:snapshot --> and <!-- bench:migration -->
# markers. Medians over rounds with the min-max spread.
# usage: report_snapshot.py RESULTS_DIR DOC_MD [NAME]   (NAME: snapshot, or snapshot-smoke)
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_net import spread  # noqa: E402
from report_storage import load, num, replace  # noqa: E402

SNAP = [("snapshot_ms", "vm.snapshot ms", 0), ("memory_alloc_mb", "memory.bin allocated MiB", 1),
        ("memory_apparent_mb", "memory.bin apparent MiB", 0), ("state_bytes", "state.bin bytes", 0),
        ("restore_ms", "vm.restore ms", 0), ("restore_to_alive_ms", "restore to first heartbeat ms", 0)]
MIG = [("total_ms", "total ms", 0), ("downtime_ms", "downtime ms", 0),
       ("rounds", "pre-copy rounds", 0), ("pages", "pages sent", 0),
       ("paused_pages", "pages sent paused", 0)]


def table(rows, keys, cols, metrics):
    out = ["| " + " | ".join(cols) + " | runs | " + " | ".join(m[1] for m in metrics) + " |",
           "|" + "---|" * (len(cols) + 1 + len(metrics))]
    for k in dict.fromkeys(tuple(r[c] for c in keys) for r in rows):
        rs = [r for r in rows if tuple(r[c] for c in keys) == k]
        out.append("| " + " | ".join(k) + f" | {len(rs)} | " +
                   " | ".join(spread([num(r[m]) for r in rs], d) for m, _, d in metrics) + " |")
    return "\n".join(out)


def plot(snaps, migs, path):
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.6))
    ax = axes[0]
    sizes = list(dict.fromkeys((r["ram_mb"], r["restore_mode"]) for r in snaps))
    for j, (k, label, _) in enumerate([SNAP[0], SNAP[4], SNAP[5]]):
        for i, s in enumerate(sizes):
            xs = [num(r[k]) for r in snaps if (r["ram_mb"], r["restore_mode"]) == s]
            x = i * 4 + j
            ax.bar(x, sorted(xs)[len(xs) // 2], color=("tab:blue", "tab:orange", "tab:green")[j],
                   label=label if i == 0 else None)
            ax.plot([x] * len(xs), xs, "k.", ms=4)
    ax.set_xticks([i * 4 + 1 for i in range(len(sizes))])
    ax.set_xticklabels([f"{s} MiB\n{m}" for s, m in sizes], fontsize=7)
    ax.set_ylabel("ms")
    ax.set_title("snapshot and restore (bar: median, dots: rounds)", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[1]
    cases = list(dict.fromkeys((r["guest"], r["how"]) for r in migs))
    for j, (k, label, _) in enumerate(MIG[:2]):
        for i, c in enumerate(cases):
            xs = [num(r[k]) for r in migs if (r["guest"], r["how"]) == c]
            x = i * 3 + j
            ax.bar(x, sorted(xs)[len(xs) // 2], color=("tab:blue", "tab:red")[j],
                   label=label if i == 0 else None)
            ax.plot([x] * len(xs), xs, "k.", ms=4)
    ax.set_xticks([i * 3 + 0.5 for i in range(len(cases))])
    ax.set_xticklabels([f"{g}\n{h}" for g, h in cases], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("ms (log)")
    ax.set_title(f"live migration, {migs[0]['ram_mb']} MiB guest", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main():
    res, doc_path = sys.argv[1], sys.argv[2]
    name = sys.argv[3] if len(sys.argv) > 3 else "snapshot"
    host = json.load(open(f"{res}/{name}-host.json"))
    snaps = load(f"{res}/{name}.csv")
    migs = load(f"{res}/{name}-migration.csv")
    doc = open(doc_path).read()
    doc = replace(doc, "snapshot-host", (
        f"Run {host['date']} on {host['host']}; load average {host['load_end']} at the end; "
        f"{host['duration_s']} s in all, {host['rounds']} rounds; lvmm at {host['lvmm']}."))
    if snaps:
        for r in snaps:  # rows of a run before the restore modes: copied
            r.setdefault("restore_mode", "Copy")
        doc = replace(doc, "snapshot", table(snaps, ["ram_mb", "touched_mb", "restore_mode"],
                                             ["guest RAM MiB", "touched MiB",
                                              "memory_restore_mode"], SNAP))
    if migs:
        doc = replace(doc, "migration", table(migs, ["ram_mb", "guest", "how"],
                                              ["guest RAM MiB", "guest", "how"], MIG))
    if snaps and migs:
        plot(snaps, migs, f"{res}/{name}.png")
    open(doc_path, "w").write(doc)


if __name__ == "__main__":
    main()
