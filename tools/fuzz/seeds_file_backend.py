#!/usr/bin/env python3
# Writes the seed corpus of fuzz_file_backend (tests/fuzz/corpus/fuzz_file_backend) in the
# harness's record format (tests/fuzz/fuzz_file_backend.c). Run from the repository root.
import os
import struct

OUT = 'tests/fuzz/corpus/fuzz_file_backend'
NONE, EIO_READ, EIO_WRITE, EIO_FLUSH, ENOSPC, SHORT_WRITE, SHORT_READ = range(7)
READ, WRITE, FLUSH, ZEROES, DSM = 0, 1, 2, 3, 4
RING, VWC_OFF, VWC_ON = b'\x02', b'\x03', b'\x07'


def io(kind, page, nlb, slba, unaligned=None, fua=False, ranges=()):
    op = kind << 2 | (0x20 if unaligned is not None else 0) | (0x80 if fua else 0)
    rec = bytes([op, page]) + (bytes([unaligned]) if unaligned is not None else b'')
    rec += bytes([nlb]) + struct.pack('<H', slba)
    for blocks, start in ranges:
        rec += bytes([blocks]) + struct.pack('<H', start)
    return rec


def fault(kind, after=0):
    return bytes([kind, after])


seeds = {
    'write_read': fault(NONE) + io(WRITE, 1, 7, 0) + RING + io(READ, 2, 7, 0) + RING,
    'eio_read': fault(EIO_READ, 1) + io(READ, 1, 7, 0) + io(READ, 2, 15, 64) + RING,
    'enospc': fault(ENOSPC) + io(WRITE, 1, 63, 128) + io(WRITE, 20, 0, 2040) + RING,
    'short_write': fault(SHORT_WRITE) + io(WRITE, 3, 31, 8, unaligned=3) + RING +
    io(READ, 3, 31, 8) + RING,
    'short_read': fault(SHORT_READ, 2) + io(READ, 1, 0, 0) + io(READ, 2, 1, 1) +
    io(READ, 4, 127, 100) + RING,
    'eio_flush': fault(EIO_FLUSH) + io(WRITE, 1, 7, 0) + io(FLUSH, 0, 0, 0) + RING,
    'vwc_off': fault(NONE) + VWC_OFF + io(WRITE, 1, 7, 0) + io(ZEROES, 0, 7, 16) +
    io(DSM, 5, 1, 0, ranges=[(8, 0), (16, 64)]) + RING + VWC_ON,
    'fua_unaligned': fault(EIO_WRITE, 3) + io(WRITE, 6, 3, 2, unaligned=1, fua=True) +
    io(WRITE, 7, 9, 2047) + io(WRITE, 8, 0, 2050) + RING,
}
os.makedirs(OUT, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(OUT, name), 'wb') as f:
        f.write(data)
