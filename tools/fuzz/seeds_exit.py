#!/usr/bin/env python3
# Writes the seed corpus of fuzz_exit (tests/fuzz/corpus/fuzz_exit): exits a booting Linux makes,
# in the harness's record format (see tests/fuzz/fuzz_exit.c). Run from the repository root.
import os
import struct

OUT = 'tests/fuzz/corpus/fuzz_exit'
SIZE = {1: 0, 2: 1, 4: 2}


def pio(port, out, size=1, data=b'', count=None):
    kind = 0 | SIZE[size] << 4 | (0x80 if out else 0)
    if count is None:
        rec = bytes([kind]) + struct.pack('<H', port)
        return rec + (data[:size].ljust(size, b'\0') if out else b'')
    kind |= 0x40
    return bytes([kind]) + struct.pack('<HH', port, count) + data


def mmio(sel, off, write, value=0, length=4, raw_len=None):
    kind = 2 | {1: 0, 2: 1, 4: 2, 8: 3}[length] << 4 | (0x80 if write else 0)
    if raw_len is not None:
        kind |= 0x40
    rec = bytes([kind]) + struct.pack('<QBH', value, sel, off)
    if raw_len is not None:
        rec += bytes([raw_len])
    return rec


def other(idx, v=0):
    return bytes([3 | idx << 3]) + struct.pack('<I', v)


seeds = {
    # rep outsb of a console line to COM1, then LSR polls
    'serial_line': pio(0x3f8, True, 1, b'Linux version\n', 14) + pio(0x3fd, False) * 3 +
    pio(0x3f9, True, 1, b'\x0f') + pio(0x3fa, False),
    # type-1 config read of the device's vendor id and BAR0 sizing through CF8/CFC
    'cf8_probe': pio(0xcf8, True, 4, struct.pack('<I', 0x80000800)) + pio(0xcfc, False, 4) +
    pio(0xcf8, True, 4, struct.pack('<I', 0x80000810)) +
    pio(0xcfc, True, 4, b'\xff\xff\xff\xff') + pio(0xcfc, False, 4),
    # ECAM: vendor id, command register, then the device's BAR and its MSI-X table
    'ecam_bar': mmio(0, 0, False) + mmio(0, 4, True, 0x6, 2) + mmio(3, 8, False) +
    mmio(3, 0x10, True, 0xdeadbeef) + mmio(3, 0x10, False) + mmio(4, 0, False, length=8) +
    mmio(0, 0x10, True, 0xffffffff) + mmio(0, 0x10, False),
    # IOAPIC: select the id and a redirection entry, write, read back; then an EOI exit
    'ioapic': mmio(2, 8, True, 0) + mmio(2, 0x18, False) + mmio(2, 8, True, 0x12) +
    mmio(2, 0x18, True, 0x31) + mmio(2, 0x18, False) + other(1, 0x31),
    # odd MMIO lengths and the unmapped LAPIC page
    'mmio_lengths': mmio(3, 9, False, raw_len=3) + mmio(3, 9, True, 1, raw_len=0) +
    mmio(5, 0x20, False) + mmio(2, 0x10, False, raw_len=200),
    # a string IN of 512 words from the PCI data port, then reset through 0xcf9
    'rep_insw': pio(0xcfc, False, 2, count=512) + pio(0xcf9, True, 1, b'\x06'),
    # ACPI S5 power-off, i8042 reset, then the stop exits of the run loop
    'stops': pio(0x604, True, 2, struct.pack('<H', 5 << 10 | 1 << 13)) +
    pio(0x64, True, 1, b'\xfe') + other(2, 1) + other(3) + other(4, 1) + other(5) + other(6, 7) +
    other(7),
    # CMOS warm-reset vector armed as Linux does for AP start-up (kvm_pvm route)
    'cmos_warm_reset': pio(0x70, True, 1, b'\x0f') + pio(0x71, True, 1, b'\x0a') +
    pio(0x70, True, 1, b'\x0f') + pio(0x71, False),
}
os.makedirs(OUT, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(OUT, name), 'wb') as f:
        f.write(data)
