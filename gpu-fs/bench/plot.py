#!/usr/bin/env python3
"""Draws the gpu-fs benchmark plots and a summary from the CSV files bench/run.sh writes.
usage: plot.py OUT_DIR"""
import csv
import os
import sys

out = sys.argv[1]


def rows(name):
    p = os.path.join(out, name)
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return [r for r in csv.DictReader(f) if r.get('kind') not in (None, 'gds-error')]


rr, hit, seq = rows('randread.csv'), rows('hit.csv'), rows('seq.csv')
abl, gpt = rows('ablate.csv'), rows('gpt2.csv')
abl_old = rows('ablate-lockpath.csv')
# one row per (backend, page, prefetch): the page sweep and the prefetch sweep share a point
seq = list({(r['backend'], r['page_size'], r['prefetch']): r for r in seq}.values())
summary = []


def series(data, key):
    s = {}
    for r in data:
        s.setdefault(r[key], []).append(r)
    return s


def label(r):
    b = r['backend']
    return b + (' (%s ctrl thr)' % r['host_threads'] if r['host_threads'] not in ('0',) else '')


rrs = {}
for r in rr:
    rrs.setdefault(label(r), []).append(r)

try:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
except ImportError:
    plt = None
    summary.append('matplotlib missing: no plots drawn')

if plt and rrs:
    for metric, ylab, fname in (('iops', 'IOPS (4 KiB random reads)', 'randread_iops.png'),
                                ('lat_us', 'mean latency per request (us)', 'randread_latency.png')):
        plt.figure(figsize=(8, 5))
        for name, v in sorted(rrs.items()):
            v = sorted(v, key=lambda r: int(r['threads']))
            plt.plot([int(r['threads']) for r in v], [float(r[metric]) for r in v], 'o-', label=name)
        plt.xscale('log', base=2)
        plt.yscale('log')
        plt.xlabel('threads issuing I/O (GPU threads; CPU threads for *-cpu)')
        plt.ylabel(ylab)
        plt.grid(True, which='both', alpha=0.3)
        plt.legend(fontsize=7)
        plt.tight_layout()
        plt.savefig(os.path.join(out, fname), dpi=110)
        plt.close()

if plt and hit:
    plt.figure(figsize=(8, 5))
    for ps, v in sorted(series(hit, 'page_size').items(), key=lambda kv: int(kv[0])):
        v = sorted(v, key=lambda r: int(r['warps']))
        plt.plot([int(r['warps']) for r in v], [float(r['cache_gbps']) for r in v], 'o-',
                 label='cache, page %d KiB' % (int(ps) // 1024))
    raw = sorted([r for r in hit if r['page_size'] == '65536'], key=lambda r: int(r['warps']))
    if raw:
        plt.plot([int(r['warps']) for r in raw], [float(r['raw_gbps']) for r in raw], 'k--',
                 label='raw HBM gather, 64 KiB')
    plt.axhline(1000, color='r', lw=0.8, ls=':', label='1 TB/s target')
    plt.xscale('log', base=2)
    plt.yscale('log')
    plt.xlabel('warps')
    plt.ylabel('GB/s')
    plt.title('page-cache hit bandwidth (warp-uniform gemini_dev_read)')
    plt.grid(True, which='both', alpha=0.3)
    plt.legend(fontsize=7)
    plt.tight_layout()
    plt.savefig(os.path.join(out, 'hit_bandwidth.png'), dpi=110)
    plt.close()

if plt and seq:
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.5))
    for be in ('nvme-mem', 'nvme-disk'):
        ps = sorted([r for r in seq if r['prefetch'] == '0' and r['backend'] == be],
                    key=lambda r: int(r['page_size']))
        ax[0].plot([int(r['page_size']) // 1024 for r in ps], [float(r['mbps']) for r in ps],
                   'o-', label='cold scan, %s' % be)
    hp = {}
    for r in hit:
        hp[int(r['page_size'])] = max(hp.get(int(r['page_size']), 0), float(r['cache_gbps']) * 1000)
    if hp:
        k = sorted(hp)
        ax[0].plot([x // 1024 for x in k], [hp[x] for x in k], 's-', label='hits (peak)')
    ax[0].set_xscale('log', base=2)
    ax[0].set_yscale('log')
    ax[0].set_xlabel('page size (KiB)')
    ax[0].set_ylabel('MB/s')
    ax[0].legend(fontsize=8)
    ax[0].grid(True, which='both', alpha=0.3)
    for b, v in series([r for r in seq if r['page_size'] == '65536'], 'backend').items():
        v = sorted(v, key=lambda r: int(r['prefetch']))
        ax[1].plot([int(r['prefetch']) for r in v], [float(r['mbps']) for r in v], 'o-', label=b)
    ax[1].set_xlabel('prefetch (pages read ahead on a miss), page 64 KiB, 64 warps')
    ax[1].set_ylabel('cold sequential scan MB/s')
    ax[1].legend(fontsize=8)
    ax[1].grid(True, alpha=0.3)
    plt.tight_layout()
    plt.savefig(os.path.join(out, 'pagesize_prefetch.png'), dpi=110)
    plt.close()

if plt and abl:
    names = {'0': 'shard lock + unlock', '1': '+ hash walk', '2': 'acquire + release (no copy)',
             '3': 'whole gemini_dev_read (copy included)'}
    pages = sorted({int(r['page_size']) for r in abl})
    fig, ax = plt.subplots(1, len(pages), figsize=(5.5 * len(pages), 4.5), squeeze=False)
    for k, pg in enumerate(pages):
        grp = {}
        for r in abl:
            if int(r['page_size']) == pg:
                grp.setdefault((r['stage'], r['build']), []).append(r)
        for (st, bld), v in sorted(grp.items()):
            v = sorted(v, key=lambda r: int(r['warps']))
            ax[0][k].plot([int(r['warps']) for r in v], [float(r['us_per_op']) for r in v],
                          'o-' if bld == 'bench_gemini' else 'x--',
                          label=names.get(st, st) + ('' if bld == 'bench_gemini' else ' (' + bld + ')'))
        # the same stages measured before the lock-free hit path (shard lock on every hit)
        for st, bld, sty, what in (('2', 'bench_gemini', 's--', 'acquire + release, shard lock'),
                                   ('3', 'bench_gemini', 'd--', 'whole gemini_dev_read, shard lock'),
                                   ('3', 'bench_gemini_noreconv', 'x:',
                                    'whole gemini_dev_read, shard lock, no reconvergence')):
            v = sorted([r for r in abl_old if int(r['page_size']) == pg and r['stage'] == st and
                        r['build'] == bld], key=lambda r: int(r['warps']))
            if v:
                ax[0][k].plot([int(r['warps']) for r in v], [float(r['us_per_op']) for r in v],
                              sty, color='gray', label=what + ' (before)')
        ax[0][k].set_xscale('log', base=2)
        ax[0][k].set_yscale('log')
        ax[0][k].set_xlabel('warps')
        ax[0][k].set_ylabel('us per operation of one warp')
        ax[0][k].set_title('hit-path ablation, page %d KiB' % (pg // 1024))
        ax[0][k].grid(True, which='both', alpha=0.3)
        ax[0][k].legend(fontsize=6)
    plt.tight_layout()
    plt.savefig(os.path.join(out, 'hit_ablation.png'), dpi=110)
    plt.close()

if plt and gpt:
    plt.figure(figsize=(max(7, 1.3 * len(gpt)), 4.5))
    lab = ['%s\n(batch %s%s)' % (r['mode'], r['batch'], ', %s ctrl thr' % r['ctrl_threads']
                                  if r['mode'].startswith('gpufs') else '') for r in gpt]
    plt.bar(lab, [float(r['step_ms']) for r in gpt], color=['C0', 'C1', 'C2', 'C3', 'C4'][:len(gpt)])
    for x, r in enumerate(gpt):
        plt.text(x, float(r['step_ms']), '%.0f ms\n%.2f GiB off' % (float(r['step_ms']),
                 float(r['offload_gib'])), ha='center', va='bottom', fontsize=8)
    plt.yscale('log')
    plt.ylabel('training step time (ms, median)')
    plt.title('GPT-2-124M step: activations in HBM vs offloaded')
    plt.tight_layout()
    plt.savefig(os.path.join(out, 'gpt2_offload.png'), dpi=110)
    plt.close()


def at(name, t):
    for r in rrs.get(name, []):
        if int(r['threads']) == t:
            return float(r['iops'])
    return None


for name, v in sorted(rrs.items()):
    best = max(v, key=lambda r: float(r['iops']))
    summary.append('%-32s peak %9.0f IOPS (%7.1f MB/s) at %5s threads; 1-thread latency %s us' % (
        name, float(best['iops']), float(best['mbps']), best['threads'],
        next((r['lat_us'] for r in v if r['threads'] == '1'), '-')))
posix = max([float(r['iops']) for r in rr if r['backend'] == 'posix-cpu'] or [0])
for t in (128, 256, 512):
    g = at('nvme-mem (1 ctrl thr)', t)
    p = at('posix-cpu', t)
    if g and p:
        summary.append('memory backing, %d threads: gpu-fs nvme %.0f IOPS vs posix %.0f IOPS at %d CPU threads: %.2fx (vs best posix %.0f: %.2fx)' % (t, g, p, t, g / p, posix, g / posix if posix else 0))
for t in (1, 64, 512, 4096):
    m, r = at('nvme-mem (1 ctrl thr)', t), at('nvme-mem-raw (1 ctrl thr)', t)
    if m and r:
        summary.append('map lookup at %d threads: %.0f IOPS via map, %.0f raw offsets: %+.2f%%' % (t, m, r, 100 * (r - m) / r))
mp = os.path.join(out, 'map.csv')
if os.path.exists(mp):
    for line in open(mp):
        f = line.strip().split(',')
        if f[0] == 'map':
            lat1 = next((float(r['lat_us']) for r in rrs.get('nvme-mem (1 ctrl thr)', []) if r['threads'] == '1'), None)
            extra = ''
            if lat1:
                extra = '; %.2f%% of a %.1f us 4 KiB read' % (100 * (float(f[1]) - float(f[2])) / (lat1 * 1000), lat1)
            summary.append('map lookup %.1f ns vs raw offset %.1f ns per translation (one warp, dependent chain)%s' % (float(f[1]), float(f[2]), extra))
for line in rows('copycost.csv'):
    summary.append('cudaMemcpyBatchAsync of %s 4 KiB copies: %s us host time and %s us in all per copy' % (
        line['copies'], line['host_us_per_copy'], line['total_us_per_copy']))
if hit:
    b = max(hit, key=lambda r: float(r['cache_gbps']))
    summary.append('page-cache hit peak %.0f GB/s (page %s, %s warps); raw gather %.0f GB/s at that point' % (
        float(b['cache_gbps']), b['page_size'], b['warps'], float(b['raw_gbps'])))
for r in seq:
    summary.append('seq %s page %s prefetch %s: %.0f MB/s' % (r['backend'], r['page_size'], r['prefetch'], float(r['mbps'])))
for r in gpt:
    summary.append('gpt2 %s batch %s (%s ctrl thr): step %s ms, offloaded %s GiB, peak %s GiB, same result %s, loss %s -> %s' % (
        r['mode'], r['batch'], r['ctrl_threads'], r['step_ms'], r['offload_gib'], r['peak_gib'], r['same'],
        r['loss0'], r.get('loss_last', '?')))
for r in abl:
    if r['warps'] in ('1', '8192'):
        summary.append('ablate page %s warps %s stage %s (%s): %s us/op, %s Mops/s' % (
            r['page_size'], r['warps'], r['stage'], r['build'], r['us_per_op'], r['mops']))
with open(os.path.join(out, 'summary.txt'), 'w') as f:
    f.write('\n'.join(summary) + '\n')
print('\n'.join(summary))
