#!/usr/bin/env python3
"""Training-shaped gpu-fs workload: a GPT-2-124M-sized model (12 layers, d=768, 12 heads,
sequence 1024, vocabulary 50257, random initial weights) takes training steps whose input
batches are read from a GVDK token file and whose saved activations are offloaded after each
layer's forward and reloaded by its backward (saved_tensors_hooks). Modes:
  hbm          everything stays in HBM
  gpufs        gemini_dev_write/gemini_dev_read kernels into a GVDK file through libgemini
               (--backend mem: the controller's namespace in host memory; disk: the file's
               blocks on the disk)
  gpufs-direct the mapped path on the copy engines: one gemini_mapped_copy_async per tensor
               between the tensor and the file's GPU-mapped host image (mem backend; on the
               disk backend the call refuses with -EOPNOTSUPP and the mode runs as gpufs)
  gpufs-mapped the mapped path with SM stores: gemini_dev_write_mapped/gemini_dev_read_mapped
               kernels (same fallback)
  posix        .cpu() + pwrite, pread + .cuda() (a file, through the OS page cache)
  pinned       the plain host-memory hook a practitioner writes: the same >= 1 MiB tensors
               copied into pinned host buffers with non_blocking copies, and back
  save_on_cpu  torch.autograd.graph.save_on_cpu(pin_memory=True) (every saved tensor)
--corpus FILE: train on that text, one byte a token (else random tokens); the loss of every
step is printed, so a falling loss shows the offloaded activations are the right ones.

usage: gpt2_offload.py LIBGEMINI_TORCH GVDK_TOOL WORK_DIR OUT_CSV [--batch 8] [--steps 4]
                       [--modes hbm,gpufs,posix,pinned,save_on_cpu] [--page 65536]
                       [--cache-mib 1024] [--backend mem|disk] [--corpus FILE] [--rounds N]
--rounds N: the modes run interleaved N times; every round's row and, per mode, the row of the
round with the median step time (round "median") go to the CSV.
"""
import os
# before CUDA starts: libgemini's copy streams must not share a hardware queue with the kernels
# that wait for them (libgemini sets it too, but only takes effect before the first context)
os.environ.setdefault('CUDA_DEVICE_MAX_CONNECTIONS', '32')
import argparse  # noqa: E402
import ctypes
import faulthandler
import struct
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

V, T, D, H, L = 50257, 1024, 768, 12, 12


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.ln2 = nn.LayerNorm(D)
        self.fc = nn.Linear(D, 4 * D)
        self.out = nn.Linear(4 * D, D)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (z.view(b, t, H, D // H).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, D))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate='tanh'))


class GPT2(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, D)
        self.wpe = nn.Embedding(T, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.lnf = nn.LayerNorm(D)
        self.head = nn.Linear(D, V, bias=False)
        self.head.weight = self.wte.weight
        for p in self.parameters():
            nn.init.normal_(p, std=0.02) if p.dim() > 1 else None

    def forward(self, idx, targets, hooks):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            if hooks:
                with torch.autograd.graph.saved_tensors_hooks(*hooks):
                    x = blk(x)
            else:
                x = blk(x)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.float().view(-1, V), targets.view(-1))


def gvdk_file(tool, path, size):
    """A GVDK file of at least size data bytes; returns (data_offset, data_size)."""
    def header():
        with open(path, 'rb') as f:
            return struct.unpack_from('<QQ', f.read(512), 32)

    # a file left by an earlier run is reused only when it is valid and large enough
    if (not os.path.exists(path) or subprocess.run([tool, 'verify', path],
                                                   capture_output=True).returncode
            or header()[1] < size):
        if os.path.exists(path):
            os.unlink(path)
        subprocess.run([tool, 'create', path, str(size)], check=True)
    return header()


class PinnedOffload:
    """The host-memory baseline: >= 1 MiB saved activations to pinned host buffers."""

    def __init__(self, params):
        self.params = params
        self.bytes, self.count = 0, 0

    def reset(self):
        self.bytes, self.count = 0, 0

    def pack(self, t):
        if (not t.is_cuda or t.data_ptr() in self.params or t.numel() * t.element_size() < (1 << 20)):
            return t
        h = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        h.copy_(t, non_blocking=True)
        self.bytes += t.numel() * t.element_size()
        self.count += 1
        return (h, t.device)

    def unpack(self, p):
        if isinstance(p, torch.Tensor):
            return p
        h, dev = p
        return h.to(dev, non_blocking=True)


class Offload:
    """Pack/unpack hooks: large saved activations go to a file, parameters and small tensors
    stay. A bump allocator over the file, reset every step."""

    def __init__(self, mode, lib, fd, size, page, posix_fd, data_off):
        self.mode, self.lib, self.fd, self.size, self.page = mode, lib, fd, size, page
        self.posix_fd, self.data_off = posix_fd, data_off
        self.params = set()
        self.err = torch.zeros(1, dtype=torch.int32, device='cuda')
        self.fell_back = False
        self.reset()

    def mapped(self, off, n, ptr, write):
        """The mapped path of gpufs-direct/gpufs-mapped; False: no image, use gpufs."""
        s = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        if self.mode == 'gpufs-direct':
            rc = self.lib.gt_mapped_async(self.fd, off, n, ctypes.c_void_p(ptr), write, s)
        else:
            rc = self.lib.gt_mapped_sm_async(self.fd, off, n, ctypes.c_void_p(ptr), write, s,
                                             ctypes.c_void_p(self.err.data_ptr()), 1024)
        if rc == -95:  # -EOPNOTSUPP: the file has no mapped image (disk backend)
            if not self.fell_back:
                print('%s: no mapped image (-EOPNOTSUPP): the gpufs path serves' % self.mode,
                      flush=True)
            self.fell_back = True
            return False
        if rc:
            raise RuntimeError('%s: mapped copy failed: %d' % (self.mode, rc))
        return True

    def reset(self):
        self.pos, self.bytes, self.count = 0, 0, 0

    def pack(self, t):
        if (not t.is_cuda or t.data_ptr() in self.params or t.numel() * t.element_size() < (1 << 20)):
            return t
        t = t.contiguous()
        n = t.numel() * t.element_size()
        off = self.pos
        self.pos += (n + self.page - 1) // self.page * self.page
        if self.pos > self.size:
            raise RuntimeError('offload file too small: %d > %d' % (self.pos, self.size))
        self.bytes += n
        self.count += 1
        if self.mode != 'posix' and not self.fell_back and self.mode != 'gpufs' and \
                self.mapped(off, n, t.data_ptr(), 1):
            return (off, n, t.shape, t.dtype)
        if self.mode != 'posix':
            s = torch.cuda.current_stream().cuda_stream
            if self.lib.gt_xfer_async(self.fd, off, n, ctypes.c_void_p(t.data_ptr()), 1,
                                      ctypes.c_void_p(s), ctypes.c_void_p(self.err.data_ptr()),
                                      1024):
                raise RuntimeError('gemini_dev_write launch failed')
        else:
            h = t.view(-1).view(torch.uint8).cpu().numpy()
            os.pwrite(self.posix_fd, memoryview(h), self.data_off + off)
        return (off, n, t.shape, t.dtype)

    def unpack(self, p):
        if isinstance(p, torch.Tensor):
            return p
        off, n, shape, dtype = p
        if self.mode != 'posix':
            t = torch.empty(shape, dtype=dtype, device='cuda')
            if self.mode != 'gpufs' and not self.fell_back and \
                    self.mapped(off, n, t.data_ptr(), 0):
                return t
            s = torch.cuda.current_stream().cuda_stream
            if self.lib.gt_xfer_async(self.fd, off, n, ctypes.c_void_p(t.data_ptr()), 0,
                                      ctypes.c_void_p(s), ctypes.c_void_p(self.err.data_ptr()),
                                      1024):
                raise RuntimeError('gemini_dev_read launch failed')
            return t
        h = np.empty(n, dtype=np.uint8)
        if os.preadv(self.posix_fd, [h], self.data_off + off) != n:
            raise RuntimeError('short pread')
        return torch.from_numpy(h).cuda().view(dtype).view(shape)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('lib')
    ap.add_argument('gvdk')
    ap.add_argument('work')
    ap.add_argument('csv')
    ap.add_argument('--batch', type=int, default=8)
    ap.add_argument('--steps', type=int, default=4)
    ap.add_argument('--modes', default='hbm,gpufs,posix,pinned,save_on_cpu')
    ap.add_argument('--backend', default='mem', choices=('mem', 'disk'))
    ap.add_argument('--corpus', default='')
    ap.add_argument('--lr', type=float, default=1e-4)
    ap.add_argument('--page', type=int, default=1 << 16)
    ap.add_argument('--cache-mib', type=int, default=1024)
    ap.add_argument('--ctrl-threads', type=int, default=1)
    ap.add_argument('--file-gib', type=int, default=4)
    ap.add_argument('--rounds', type=int, default=1,
                    help='run the modes interleaved N times; report each round and the median')
    ap.add_argument('--stacks-after', type=int, default=0,
                    help='print every thread\'s Python stack each N s (hang diagnosis)')
    a = ap.parse_args()
    if a.stacks_after:
        faulthandler.dump_traceback_later(a.stacks_after, repeat=True)
    torch.backends.cuda.matmul.allow_tf32 = True
    B, steps = a.batch, a.steps

    lib = ctypes.CDLL(a.lib)
    lib.gt_xfer_async.argtypes = [ctypes.c_int, ctypes.c_ulonglong, ctypes.c_ulonglong,
                                  ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                  ctypes.c_void_p, ctypes.c_int]
    lib.gt_mapped_async.argtypes = [ctypes.c_int, ctypes.c_ulonglong, ctypes.c_ulonglong,
                                    ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    lib.gt_mapped_sm_async.argtypes = lib.gt_xfer_async.argtypes
    lib.gt_open.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.gt_init.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_uint]
    lib.gt_size.restype = ctypes.c_longlong

    # token file: steps+1 batches (int32), read through gpu-fs or pread: the corpus's bytes as
    # tokens (consecutive windows, wrapping), else random tokens
    tok_bytes = (steps + 1) * B * (T + 1) * 4
    tok_path = os.path.join(a.work, 'tokens.gvdk')
    toff, _ = gvdk_file(a.gvdk, tok_path, max(tok_bytes, 1 << 20) + (1 << 20))
    if a.corpus:
        text = np.frombuffer(open(a.corpus, 'rb').read(), dtype=np.uint8)
        if len(text) < B * (T + 1):
            sys.exit('corpus %s: %d bytes, fewer than one batch' % (a.corpus, len(text)))
        toks = np.resize(text, tok_bytes // 4).astype(np.int32)
        print('corpus %s: %d bytes (one byte a token), %d tokens a step' %
              (a.corpus, len(text), B * T), flush=True)
    else:
        toks = np.random.default_rng(1).integers(0, V, tok_bytes // 4, dtype=np.int32)
    with open(tok_path, 'r+b') as f:
        f.seek(toff)
        f.write(toks.tobytes())
        f.flush()
        os.fsync(f.fileno())
    act_path = os.path.join(a.work, 'activations.gvdk')
    aoff, asize = gvdk_file(a.gvdk, act_path, a.file_gib << 30)

    rc = lib.gt_init(0 if a.backend == 'mem' else 1, a.page, a.cache_mib << 20, a.ctrl_threads)
    if rc:
        sys.exit('gt_init failed: %d' % rc)
    tfd = lib.gt_open(tok_path.encode(), 0)
    afd = lib.gt_open(act_path.encode(), 1)
    if tfd < 0 or afd < 0:
        sys.exit('gemini_open failed')
    pfd_tok = os.open(tok_path, os.O_RDONLY)
    pfd_act = os.open(act_path, os.O_RDWR)

    torch.manual_seed(0)
    model = GPT2().cuda().to(torch.bfloat16)  # bf16 weights: saved tensors are activations
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}
    err = torch.zeros(1, dtype=torch.int32, device='cuda')
    rows, ref = [], [None]

    def load(step, via_gpufs):
        n = B * (T + 1) * 4
        off = (step % (steps + 1)) * n
        if via_gpufs:
            buf = torch.empty(B * (T + 1), dtype=torch.int32, device='cuda')
            lib.gt_xfer_async(tfd, off, n, ctypes.c_void_p(buf.data_ptr()), 0,
                              ctypes.c_void_p(torch.cuda.current_stream().cuda_stream),
                              ctypes.c_void_p(err.data_ptr()), 64)
        else:
            h = np.empty(B * (T + 1), dtype=np.int32)
            os.preadv(pfd_tok, [h], toff + off)
            buf = torch.from_numpy(h).cuda()
        buf = buf.view(B, T + 1).long()
        return buf[:, :T].contiguous(), buf[:, 1:].contiguous()

    def run_mode(mode, rnd):
        model.load_state_dict(init)
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr, fused=True)
        params = {p.data_ptr() for p in model.parameters()}
        if mode in ('gpufs-direct', 'gpufs-mapped'):
            # pages an earlier gpufs run left cached: written back and dropped now, untimed
            rc = lib.gt_drop(afd)
            if rc:
                sys.exit('%s: gt_drop failed: %d' % (mode, rc))
        if mode == 'pinned':
            off = PinnedOffload(params)
        else:
            off = Offload(mode, lib, afd, asize, a.page, pfd_act, aoff)
            off.params = params
        hooks = None if mode in ('hbm', 'save_on_cpu') else (off.pack, off.unpack)
        times, loads, fwd, losses, gnorm = [], [], [], [], None
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        for step in range(steps + 1):  # step 0 warms up
            off.reset()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            x, y = load(step, mode != 'posix')
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            if mode == 'save_on_cpu':
                with torch.autograd.graph.save_on_cpu(pin_memory=True):
                    loss = model(x, y, None)
            else:
                loss = model(x, y, hooks)
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            loss.backward()
            if step == 0:
                gnorm = float(torch.sqrt(sum((p.grad.float() ** 2).sum()
                                             for p in model.parameters())))
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            t3 = time.perf_counter()
            losses.append(float(loss))
            if step:
                times.append(t3 - t0)
                loads.append(t1 - t0)
                fwd.append(t2 - t1)
        print('gpt2 %s losses by step: %s' % (mode, ' '.join('%.4f' % v for v in losses)),
              flush=True)
        if int(err.item()) or (hasattr(off, 'err') and int(off.err.item())):
            sys.exit('%s: a gemini_dev_read/gemini_dev_write failed' % mode)
        peak = torch.cuda.max_memory_allocated() / 2**30
        st = (ctypes.c_ulonglong * 6)()
        lib.gt_stats(st)
        med = lambda v: sorted(v)[len(v) // 2] * 1e3
        if ref[0] is None:
            ref[0] = (losses, gnorm)
        same = all(abs(u - v) <= 1e-3 * abs(v) for u, v in zip(losses, ref[0][0])) and \
            abs(gnorm - ref[0][1]) <= 1e-3 * ref[0][1]
        label = mode + ('-disk' if mode.startswith('gpufs') and a.backend == 'disk' else '')
        rows.append((label, B, med(times), med(loads), med(fwd), off.bytes / 2**30, off.count,
                     peak, losses[0], gnorm, int(same), a.page, a.cache_mib, a.ctrl_threads,
                     list(st), losses[-1], str(rnd)))
        print('gpt2 %-6s round %d batch %d: step %.1f ms (load %.2f ms, forward %.1f ms), '
              'offloaded %.2f GiB in %d tensors, peak torch memory %.2f GiB, loss %.4f, '
              'grad norm %.4f, same as first mode: %s; cache stats %s' %
              (label, rnd, B, med(times), med(loads), med(fwd), off.bytes / 2**30, off.count, peak,
               losses[0], gnorm, bool(same), list(st)), flush=True)
        del off

    modes = a.modes.split(',')
    for rnd in range(1, a.rounds + 1):
        for mode in modes:
            run_mode(mode, rnd)
    if a.rounds > 1:
        for label in dict.fromkeys(r[0] for r in rows):
            mine = [r for r in rows if r[0] == label]
            m = sorted(mine, key=lambda r: r[2])[len(mine) // 2]
            steps_ms = ' '.join('%.1f' % r[2] for r in mine)
            print('gpt2 %-6s median of %d rounds: step %.1f ms (rounds: %s)' %
                  (label, len(mine), m[2], steps_ms), flush=True)
            rows.append(m[:16] + ('median',))
    new = not os.path.exists(a.csv)
    with open(a.csv, 'a') as f:
        if new:
            f.write('kind,mode,batch,step_ms,load_ms,fwd_ms,offload_gib,tensors,peak_gib,'
                    'loss0,gnorm0,same,page,cache_mib,ctrl_threads,loss_last,corpus,round\n')
        for r in rows:
            f.write('gpt2,%s,%d,%.1f,%.3f,%.1f,%.3f,%d,%.2f,%.5f,%.5f,%d,%d,%d,%d' % r[:14] +
                    ',%.5f,%s,%s\n' % (r[15], os.path.basename(a.corpus) or 'random', r[16]))
    lib.gt_exit()


if __name__ == '__main__':
    main()
