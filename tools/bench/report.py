#!/usr/bin/python3
# Turns the raw results under docs/bench/ (CSV + host.json) into plots (docs/bench/*.png) and the
# result tables of docs/benchmarks.md, rewritten in place between <!-- bench:NAME --> and
# <!-- /bench:NAME --> markers so that the prose around them stays as written.
# usage: report.py RESULTS_DIR DOC_MD
import csv
import json
import re
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# config key, table label, plot label
NVME_ORDER = [
    ("mmio", "lvmm, plain MMIO doorbells", "lvmm\nplain MMIO db"),
    ("shadow", "lvmm, shadow doorbells + ioeventfd", "lvmm\nshadow db"),
    ("shadow_cmb", "lvmm, shadow doorbells, SQ in CMB", "lvmm\nshadow db\nSQ in CMB"),
    ("native_read", "host fio, sequential 4k", "host fio\nsequential"),
    ("native_randread", "host fio, random 4k", "host fio\nrandom"),
]
BASELINE = "native_read"  # the same access pattern as the guest's loops


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(v):
    return float(v) if v not in ("", None) else None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(v, digits=0):
    if v is None:
        return "-"
    return f"{v:.{digits}f}"


def nvme_summary(rows):
    by = {}
    for r in rows:
        by.setdefault(r["config"], []).append(r)
    base = {r["round"]: num(r["us_per_io"]) for r in by.get(BASELINE, [])}
    plain = {r["round"]: num(r["us_per_io"]) for r in by.get("mmio", [])}
    out = []
    for key, label, short in NVME_ORDER:
        rs = by.get(key, [])
        if not rs:
            continue
        ratios = [num(r["us_per_io"]) / base[r["round"]] for r in rs
                  if base.get(r["round"])]
        us = [num(r["us_per_io"]) for r in rs]
        # Same guest boot as the plain loop: the most direct side-by-side figure.
        vs_plain = [num(r["us_per_io"]) / plain[r["round"]] for r in rs
                    if plain.get(r["round"]) and not key.startswith("native")]
        out.append({
            "key": key, "label": label, "short": short, "rounds": len(rs), "us": med(us),
            "us_min": min(us), "us_max": max(us), "iops": med([num(r["iops"]) for r in rs]),
            "p50": med([num(r["p50_us"]) for r in rs]), "p99": med([num(r["p99_us"]) for r in rs]),
            "ratio": med(ratios), "vs_plain": med(vs_plain),
            "exits": med([num(r["user_exits_per_io"]) for r in rs]),
            "db": med([num(r["doorbell_writes_per_io"]) for r in rs]),
            "cpu": med([num(r["cpu_us_per_io"]) for r in rs]),
            "cpu_io": med([num(r["io_thread_cpu_us_per_io"]) for r in rs]),
            "cpu_vcpu": med([num(r["vcpu_cpu_us_per_io"]) for r in rs]),
            "wait": med([num(r.get("vcpu_runq_wait_us_per_io")) for r in rs]),
        })
    return out


def nvme_table(summ):
    lines = [
        "| configuration | us/I/O (median, min-max) | IOPS | p50 / p99 us | x plain MMIO | "
        "x native seq | "
        "user-space exits/I/O | doorbell writes/I/O | host CPU us/I/O (I/O thread, vCPU) | "
        "vCPU run-queue wait us/I/O |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summ:
        cpu = fmt(s["cpu"])
        if s["cpu_io"] is not None:
            cpu += f" ({fmt(s['cpu_io'])}, {fmt(s['cpu_vcpu'])})"
        pcts = "n/a (guest reports means only)" if s["p50"] is None else \
            f"{fmt(s['p50'])} / {fmt(s['p99'])}"
        lines.append(
            f"| {s['label']} | {fmt(s['us'])} ({fmt(s['us_min'])}-{fmt(s['us_max'])}) | "
            f"{fmt(s['iops'])} | {pcts} | {fmt(s['vs_plain'], 2)} | {fmt(s['ratio'], 2)} | "
            f"{fmt(s['exits'], 2)} | "
            f"{fmt(s['db'], 2)} | {cpu} | {fmt(s['wait'])} |")
    return "\n".join(lines)


def nvme_plot(rows, summ, png):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    labels = [s["short"] for s in summ]
    xs = range(len(summ))
    ax1.bar(xs, [s["us"] for s in summ], color="#4c72b0", label="wall time per I/O")
    ax1.bar(xs, [s["wait"] or 0 for s in summ], width=0.5, color="none", edgecolor="#cccccc",
            hatch="///", label="of which the vCPU waited for a host CPU")
    ax1.legend(fontsize=7)
    for i, s in enumerate(summ):
        pts = [num(r["us_per_io"]) for r in rows if r["config"] == s["key"]]
        ax1.plot([i] * len(pts), pts, "k.", ms=4)
    ax1.set_xticks(list(xs), labels, fontsize=8)
    ax1.set_ylabel("mean us per 4 KiB read")
    ax1.set_title("QD1 4 KiB reads, same image (bar: median, dots: rounds)", fontsize=10)
    io = [s["cpu_io"] or 0 for s in summ]
    vcpu = [s["cpu_vcpu"] or 0 for s in summ]
    rest = [max(0.0, (s["cpu"] or 0) - a - b) for s, a, b in zip(summ, io, vcpu)]
    ax2.bar(xs, io, label="lvmm I/O thread", color="#dd8452")
    ax2.bar(xs, vcpu, bottom=io, label="lvmm vCPU thread", color="#55a868")
    ax2.bar(xs, rest, bottom=[a + b for a, b in zip(io, vcpu)],
            label="other (fio: whole process)", color="#8172b2")
    for i, s in enumerate(summ):
        ax2.annotate(f"{fmt(s['exits'], 2)} exits\n{fmt(s['db'], 2)} db writes",
                     (i, max(s["cpu"] or 0, io[i] + vcpu[i])), ha="center", va="bottom", fontsize=7)
    ax2.set_xticks(list(xs), labels, fontsize=8)
    ax2.set_ylabel("host CPU us per I/O (median of rounds)")
    ax2.set_title("host CPU, user-space exits, doorbell writes per I/O", fontsize=10)
    ax2.legend(fontsize=7)
    ax2.set_ylim(0, max(s["cpu"] or 0 for s in summ) * 1.3)
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)


EXIT_KINDS = [("ring0_pio_us", "PIO (port 0x80) from guest ring 0"),
              ("ring0_mmio_us", "MMIO read of an unbacked page from guest ring 0"),
              ("ring3_pio_us", "PIO from guest ring 3 (#GP to ring 0 first, see notes)"),
              ("ring3_mmio_us", "MMIO read from guest ring 3 (what a plain doorbell costs)")]


def exits_table(rows):
    lines = ["| exit to lvmm's user space | us, median of rounds | min-max |", "|---|---|---|"]
    for key, label in EXIT_KINDS:
        xs = [num(r[key]) for r in rows]
        lines.append(f"| {label} | {fmt(med(xs), 1)} | {fmt(min(xs), 1)}-{fmt(max(xs), 1)} |")
    return "\n".join(lines)


def api_table(rows):
    lines = ["| endpoint | connection | requests | p50 us | p99 us | max us |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| `{r['endpoint']}` | {r['connection']} | {r['requests']} | "
                     f"{r['p50_us']} | {r['p99_us']} | {r['max_us']} |")
    return "\n".join(lines)


def api_plot(cdf_rows, png):
    fig, ax = plt.subplots(figsize=(7, 4))
    pct = [int(r["percentile"]) for r in cdf_rows]
    for col in list(cdf_rows[0].keys())[1:]:
        ax.plot([float(r[col]) for r in cdf_rows], pct, label=col)
    ax.set_xscale("log")
    ax.set_xlabel("round-trip latency, us (log)")
    ax.set_ylabel("percentile")
    ax.set_title("REST API round trip over the Unix socket", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)


def boot_table(rows):
    lines = ["| VM | runs | wall p50 ms | wall p90 ms | wall min ms | lvmm CPU ms (mean) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['shape']} | {r['runs']} | {r['wall_ms_p50']} | {r['wall_ms_p90']} | "
                     f"{r['wall_ms_min']} | {r['cpu_ms_mean']} |")
    return "\n".join(lines)


def boot_plot(rows, png):
    fig, ax = plt.subplots(figsize=(7, 3.6))
    xs = range(len(rows))
    p50 = [float(r["wall_ms_p50"]) for r in rows]
    p90 = [float(r["wall_ms_p90"]) for r in rows]
    ax.bar(xs, p50, color="#4c72b0", label="wall p50")
    ax.errorbar(xs, p50, yerr=[[0] * len(rows), [b - a for a, b in zip(p50, p90)]], fmt="none",
                ecolor="k", capsize=4, label="up to p90")
    ax.bar(xs, [float(r["cpu_ms_mean"]) for r in rows], width=0.3, color="#dd8452",
           label="lvmm CPU (mean)")
    ax.set_xticks(list(xs), [r["shape"].replace(", ", ",\n") for r in rows], fontsize=8)
    ax.set_ylabel("ms from exec to exit")
    ax.set_title("lvmm start to bench-guest poweroff", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)


def replace_block(doc, name, body):
    rx = re.compile(rf"(<!-- bench:{name} -->\n).*?(<!-- /bench:{name} -->)", re.S)
    if not rx.search(doc):
        sys.exit(f"report: {name}: no <!-- bench:{name} --> block in the document")
    return rx.sub(lambda m: m.group(1) + body + "\n" + m.group(2), doc)


def main():
    res, doc_path = sys.argv[1], sys.argv[2]
    with open(f"{res}/host.json") as f:
        host = json.load(f)
    with open(doc_path) as f:
        doc = f.read()
    doc = replace_block(doc, "host", f"Run {host['date']} on {host['host']}; "
                        f"`make bench` took {host.get('duration_s', '?')} s.")
    nvme_rows = load(f"{res}/nvme-qd1.csv")
    summ = nvme_summary(nvme_rows)
    nvme_plot(nvme_rows, summ, f"{res}/nvme-qd1.png")
    doc = replace_block(doc, "nvme", nvme_table(summ))
    doc = replace_block(doc, "exits", exits_table(load(f"{res}/exits.csv")))
    api_rows = load(f"{res}/api-latency.csv")
    api_plot(load(f"{res}/api-latency-cdf.csv"), f"{res}/api-latency.png")
    doc = replace_block(doc, "api", api_table(api_rows))
    boot_rows = load(f"{res}/boot.csv")
    boot_plot(boot_rows, f"{res}/boot.png")
    doc = replace_block(doc, "boot", boot_table(boot_rows))
    with open(doc_path, "w") as f:
        f.write(doc)


if __name__ == "__main__":
    main()
