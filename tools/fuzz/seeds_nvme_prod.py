#!/usr/bin/env python3
# Writes the seed corpus of fuzz_nvme_prod (tests/fuzz/corpus/fuzz_nvme_prod) in the harness's
# record format (tests/fuzz/fuzz_nvme_prod.c). Run from the repository root.
import os
import struct

OUT = 'tests/fuzz/corpus/fuzz_nvme_prod'


def op(kind, q2=False, b20=False, b40=False, b80=False):
    """The op byte whose value mod 10 is kind with the flag bits asked for."""
    want = (0x10 if q2 else 0) | (0x20 if b20 else 0) | (0x40 if b40 else 0) | (0x80 if b80 else 0)
    for v in range(256):
        if v % 10 == kind and v & 0xf0 == want:
            return bytes([v])
    raise ValueError((kind, want))


def addr(sel, off, raw=None):
    return bytes([sel]) + struct.pack('<H', off) + (struct.pack('<Q', raw) if raw is not None else b'')


def rw(write, q2, prp1, prp2, nlb, slba=0):
    return op(3, q2, b40=write) + prp1 + prp2 + bytes([nlb, slba])


def sqe(opcode, nsid=1, prp1=0, prp2=0, cdw10=0, cdw11=0, cdw12=0):
    return struct.pack('<BBHIQQQQIIIIII', opcode, 0, 0, nsid, 0, 0, prp1, prp2, cdw10, cdw11,
                       cdw12, 0, 0, 0)


seeds = {
    # a write and a read of 8 blocks through SQ 1 (in the CMB), data in low RAM
    'rw_cmb': rw(True, False, addr(0, 0x200), addr(0, 0x400), 7) +
    rw(False, False, addr(0, 0x600), addr(0, 0x800), 7) + op(7) + b'\x02',
    # a transfer whose first page is the last before the 32-bit hole: PRP 2 inside the hole
    'prp_into_hole': rw(False, True, addr(1, 0x7000), addr(2, 0), 15) +
    rw(True, True, addr(3, 0x7000), addr(3, 0x8000), 15),
    # PRP list in high RAM, pointing across the end of RAM
    'prp_list_high': op(4) + addr(4, 0x6000) + struct.pack('<Q', (4 << 30) + (64 << 20) - 0x1000) +
    op(4) + addr(4, 0x6008) + struct.pack('<Q', (4 << 30) + (64 << 20)) +
    rw(False, False, addr(4, 0x5000), addr(4, 0x6000), 23),
    # shadow doorbells on (low RAM), I/O rung through the shadow value only, moved above 4 GiB
    'dbbuf_on_move': op(5) + addr(0, 0x1000) + addr(0, 0x2000) +
    op(2, b40=True) + sqe(2, prp1=0x30000, cdw12=0) + op(7, b40=True) + b'\x01' +
    op(5) + addr(3, 0x8000) + addr(3, 0x9000) + op(2, True, b40=True) + sqe(1, prp1=0x30000),
    # shadow doorbell pages straddling the hole, then a reset (off) and up again
    'dbbuf_hole_reset': op(5) + addr(1, 0x6000) + addr(1, 0x7000) +
    op(2, True, b40=True) + sqe(2, prp1=0x30000) + op(6) + op(2) + sqe(2, prp1=0x30000),
    # the CMB BAR moves away while SQ 1 lives there, an SQE rung, then back
    'cmb_move': op(8, b80=True) + op(2) + sqe(2, prp1=0x30000) + op(8) + op(2) +
    sqe(2, prp1=0x30000) + op(8, b20=True) + struct.pack('<Q', 0x8000200003),
    # parked completions across a controller reset
    'park_reset': op(9, b40=True) + rw(True, False, addr(0, 0), addr(0, 0), 0) +
    rw(False, True, addr(0, 8), addr(0, 8), 0) + op(6) + op(9) + op(9, b40=True),
    # doorbells past the last queue, and odd registers
    'doorbells': op(0, b80=True) + struct.pack('<HI', 7, 5) + op(0, b80=True) +
    struct.pack('<HI', 0x105, 1) + op(0) + struct.pack('<HI', 0x50, 0xffffffff) +
    op(0) + struct.pack('<HI', 0x1c, 1),
}
os.makedirs(OUT, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(OUT, name), 'wb') as f:
        f.write(data)
