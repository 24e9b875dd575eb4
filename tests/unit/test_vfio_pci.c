/* The passthrough device model (devices/vfio) over a fake VFIO function, on a real PCI bus
 * without KVM: what the guest sees of config space (emulated header and BARs, the capability
 * chain without MSI, the PCIe type, the device's own bytes), what reaches the device (command,
 * passthrough registers, BAR accesses outside the MSI-X table), BAR pieces as guest memory that
 * follows the BAR, the expansion ROM behind the ROM BAR, extended config space through ECAM
 * with hidden capabilities unlinked, MSI-X vectors handed to VFIO, and devices refused at
 * creation. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices.h"
#include "layout.h"
#include "pci.h"
#include "testutil.h"
#include "vfio_fake.h"
#include "vfio_host.h"

static struct bus pio, mmio;
static struct pci_bus pb;
static struct fake_vfio fake;
static struct vfio_pci vp;
static unsigned devfn;
static struct hostmap {
	uint64_t gpa, size;
	void *host;
	bool used;
} maps[32];
static struct route {
	bool set, masked;
	uint64_t addr;
	uint32_t data;
} routes[64];
static int irqfds[64];
static int next_gsi;
static int unmap_cmd; /* the device's command register at the first unmap, -1 before it */

static int fake_alloc_gsi(void *o)
{
	return next_gsi < 64 ? next_gsi++ : -ENOSPC;
}

static int fake_route(void *o, unsigned gsi, uint64_t addr, uint32_t data, bool masked)
{
	ck_assert_uint_lt(gsi, 64);
	routes[gsi] = (struct route){.set = true, .masked = masked, .addr = addr, .data = data};
	return 0;
}

static int fake_irqfd(void *o, unsigned gsi, int efd, bool assign)
{
	irqfds[gsi] = assign ? efd : -1;
	return 0;
}

static int fake_map(void *o, uint64_t gpa, uint64_t size, void *host)
{
	for (unsigned i = 0; i < 32; i++)
		if (!maps[i].used) {
			maps[i] = (struct hostmap){gpa, size, host, true};
			return 0;
		}
	return -ENOSPC;
}

static int fake_unmap(void *o, uint64_t gpa)
{
	if (unmap_cmd < 0)
		unmap_cmd = fake.cfg[PCI_COMMAND] | fake.cfg[PCI_COMMAND + 1] << 8;
	for (unsigned i = 0; i < 32; i++)
		if (maps[i].used && maps[i].gpa == gpa) {
			maps[i].used = false;
			return 0;
		}
	ck_abort_msg("unmap of 0x%llx that is not mapped", (unsigned long long)gpa);
	return -ENOENT;
}

static struct hostmap *map_at(uint64_t gpa)
{
	for (unsigned i = 0; i < 32; i++)
		if (maps[i].used && maps[i].gpa == gpa)
			return &maps[i];
	return NULL;
}

static unsigned nmaps(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < 32; i++)
		n += maps[i].used;
	return n;
}

static const struct dev_host host = {.map_host = fake_map, .unmap_host = fake_unmap};

static int build(char *err, unsigned errlen)
{
	return vfio_pci_init(&vp, "gpu0", &fake.info, &fake_vfio_ops, &fake, &host, err, errlen);
}

static void setup(void)
{
	struct pci_platform_ops ops = {.alloc_gsi = fake_alloc_gsi,
				       .set_msi_route = fake_route,
				       .irqfd = fake_irqfd,
				       .map_host = fake_map,
				       .unmap_host = fake_unmap};
	char err[160];

	bus_init(&pio);
	bus_init(&mmio);
	memset(maps, 0, sizeof(maps));
	memset(routes, 0, sizeof(routes));
	memset(irqfds, 0xff, sizeof(irqfds));
	next_gsi = 24;
	unmap_cmd = -1;
	fake_vfio_init(&fake);
	ck_assert_int_eq(pci_bus_init(&pb, &ops, &pio, &mmio, err, sizeof(err)), 0);
	devfn = 0;
}

static void teardown(void)
{
	if (devfn)
		vfio_pci_exit(&vp);
	pci_bus_exit(&pb);
}

/* The fake function built and placed on the bus, as devices.c does (create, add, realize). */
static void plug(void)
{
	char err[160];

	ck_assert_msg(build(err, sizeof(err)) == 0, "%s", err);
	ck_assert_msg(pci_bus_add(&pb, &vp.pci, err, sizeof(err)) == 0, "%s", err);
	vfio_pci_cfg_sync_command(&vp);
	devfn = vp.pci.devfn;
}

static uint32_t cfg_rd(unsigned reg)
{
	uint32_t a = 0x80000000u | devfn << 8 | (reg & 0xfc), v;

	bus_access(&pio, LAYOUT_PCI_CONF_ADDR, &a, 4, true);
	bus_access(&pio, LAYOUT_PCI_CONF_DATA, &v, 4, false);
	return v;
}

static void cfg_wr(unsigned reg, uint32_t v)
{
	uint32_t a = 0x80000000u | devfn << 8 | (reg & 0xfc);

	bus_access(&pio, LAYOUT_PCI_CONF_ADDR, &a, 4, true);
	bus_access(&pio, LAYOUT_PCI_CONF_DATA, &v, 4, true);
}

static void cfg_wr16(unsigned reg, uint16_t v)
{
	uint32_t a = 0x80000000u | devfn << 8 | (reg & 0xfc);

	bus_access(&pio, LAYOUT_PCI_CONF_ADDR, &a, 4, true);
	bus_access(&pio, LAYOUT_PCI_CONF_DATA + (reg & 2), &v, 2, true);
}

static uint64_t bar_addr(unsigned bar, bool is64)
{
	uint64_t a = cfg_rd(0x10 + 4 * bar) & ~0xfULL;

	return is64 ? a | (uint64_t)cfg_rd(0x14 + 4 * bar) << 32 : a;
}

/* A config access through ECAM, which reaches extended config space. */
static uint32_t ecam_rd(unsigned reg, unsigned len)
{
	uint32_t v = 0;

	ck_assert(
	    bus_access(&mmio, LAYOUT_ECAM_START + ((uint64_t)devfn << 12) + reg, &v, len, false));
	return v;
}

static void ecam_wr(unsigned reg, uint32_t v, unsigned len)
{
	ck_assert(
	    bus_access(&mmio, LAYOUT_ECAM_START + ((uint64_t)devfn << 12) + reg, &v, len, true));
}

static bool dev_written(unsigned lo, unsigned hi)
{
	for (unsigned i = 0; i < fake.cfg_writes && i < FAKE_MAX_LOG; i++)
		if (fake.cfg_log[i].off < hi && fake.cfg_log[i].off + fake.cfg_log[i].len > lo)
			return true;
	return false;
}

START_TEST(test_header_emulated)
{
	plug();
	ck_assert_uint_eq(cfg_rd(0x00), 0x233010de);
	ck_assert_uint_eq(cfg_rd(0x08), 0x030200a1);
	ck_assert_uint_eq(cfg_rd(0x2c), 0x16c110de);
	ck_assert_uint_eq(cfg_rd(0x0c) >> 16 & 0x7f, 0);
	/* the device's INTA and VFIO's INTx: pin A, slot 1's route (test_vfio_intx for the rest) */
	ck_assert_uint_eq(cfg_rd(0x3c) & 0xffff, 0x0100 | LAYOUT_PCI_INTX_ROUTE(1, 1));
	/* the ROM BAR placed, not enabled */
	ck_assert_uint_ne(cfg_rd(0x30), 0);
	ck_assert_uint_eq(cfg_rd(0x30) & PCI_ROM_ADDRESS_ENABLE, 0);
	ck_assert_uint_eq(fake.resets, 1);
	/* The header is lvmm's: vendor writes stick nowhere, and never reach the device. */
	fake.cfg_writes = 0;
	cfg_wr(0x00, 0);
	cfg_wr(0x3c, 0x0b);
	ck_assert_uint_eq(cfg_rd(0x00), 0x233010de);
	ck_assert_uint_eq(cfg_rd(0x3c) & 0xff, 0x0b);
	ck_assert_uint_eq(fake.cfg_writes, 0);
}
END_TEST

START_TEST(test_bar_sizing)
{
	plug();
	/* BAR0: 32-bit, 16 MiB */
	cfg_wr(0x10, 0xffffffff);
	ck_assert_uint_eq(cfg_rd(0x10), 0xff000000);
	/* BAR1: 64-bit prefetchable, 32 GiB */
	cfg_wr(0x14, 0xffffffff);
	cfg_wr(0x18, 0xffffffff);
	ck_assert_uint_eq(cfg_rd(0x14), PCI_BAR_MEM_TYPE_64 | PCI_BAR_MEM_PREFETCH);
	ck_assert_uint_eq(cfg_rd(0x18), 0xfffffff8);
	/* BAR3: a 2 KiB region presented as a page */
	cfg_wr(0x1c, 0xffffffff);
	cfg_wr(0x20, 0xffffffff);
	ck_assert_uint_eq(cfg_rd(0x1c), 0xfffff000 | PCI_BAR_MEM_TYPE_64 | PCI_BAR_MEM_PREFETCH);
	/* BAR5: the I/O BAR is not passed through */
	cfg_wr(0x24, 0xffffffff);
	ck_assert_uint_eq(cfg_rd(0x24), 0);
	/* sizing never reaches the device */
	for (unsigned i = 0; i < fake.cfg_writes && i < FAKE_MAX_LOG; i++)
		ck_assert(fake.cfg_log[i].off < 0x10 || fake.cfg_log[i].off >= 0x28);
}
END_TEST

START_TEST(test_bar_placement)
{
	plug();
	uint64_t b0 = bar_addr(0, false), b1 = bar_addr(1, true);

	ck_assert_uint_ge(b0, LAYOUT_MMIO32_START);
	ck_assert_uint_lt(b0 + FAKE_BAR0_SIZE, LAYOUT_MMIO32_START + LAYOUT_MMIO32_SIZE + 1);
	ck_assert_uint_ge(b1, LAYOUT_MMIO64_START);
	ck_assert_uint_eq(b1 & (FAKE_BAR1_SIZE - 1), 0);
}
END_TEST

START_TEST(test_caps_chain)
{
	unsigned off, ids[8], n = 0;

	plug();
	ck_assert(cfg_rd(0x04) >> 16 & PCI_STATUS_CAP_LIST);
	for (off = cfg_rd(0x34) & 0xff; off && n < 8; off = cfg_rd(off) >> 8 & 0xff)
		ids[n++] = cfg_rd(off) & 0xff;
	/* the device's list, in its order */
	ck_assert_uint_eq(n, 5);
	ck_assert_uint_eq(ids[0], 0x01);
	ck_assert_uint_eq(ids[1], PCI_CAP_ID_MSI);
	ck_assert_uint_eq(ids[2], PCI_CAP_ID_EXP);
	ck_assert_uint_eq(ids[3], PCI_CAP_ID_MSIX);
	ck_assert_uint_eq(ids[4], PCI_CAP_ID_VNDR);
	/* lvmm's bus has no root ports: an integrated endpoint */
	ck_assert_uint_eq(cfg_rd(FAKE_PCIE_CAP) >> 16 & 0xff, 0x02 | PCI_EXP_TYPE_RC_END << 4);
	/* the PCIe capability's other registers are the device's, read live */
	fake.cfg[FAKE_PCIE_CAP + PCI_EXP_DEVCAP + 3] = 0x77;
	ck_assert_uint_eq(cfg_rd(FAKE_PCIE_CAP + PCI_EXP_DEVCAP) >> 24, 0x77);
	ck_assert_uint_eq(cfg_rd(FAKE_MSIX_CAP) >> 16 & 0x7ff, FAKE_MSIX_NVEC - 1);
	/* a vendor capability's body is the device's */
	fake.cfg[FAKE_VNDR_CAP + 3] = 0x33;
	ck_assert_uint_eq(cfg_rd(FAKE_VNDR_CAP) >> 24, 0x33);
}
END_TEST

START_TEST(test_rom_bar)
{
	uint32_t rom, v;
	unsigned regions;

	plug();
	rom = cfg_rd(0x30);
	/* placed like a 32-bit BAR: 36 KiB shown as 64 KiB, naturally aligned */
	ck_assert_uint_ge(rom, LAYOUT_MMIO32_START);
	ck_assert_uint_le(rom + 0x10000ULL, LAYOUT_MMIO32_START + LAYOUT_MMIO32_SIZE);
	ck_assert_uint_eq(rom & 0xffff, 0);
	/* not enabled: nothing decodes there */
	ck_assert(!bus_access(&mmio, rom + 0x10, &v, 4, false));
	/* sizing: the size mask, the enable bit as written */
	fake.cfg_writes = 0;
	cfg_wr(0x30, 0xfffff800);
	ck_assert_uint_eq(cfg_rd(0x30), 0xffff0000);
	cfg_wr(0x30, 0xffffffff);
	ck_assert_uint_eq(cfg_rd(0x30), 0xffff0001);
	cfg_wr(0x30, rom | PCI_ROM_ADDRESS_ENABLE);
	ck_assert_uint_eq(cfg_rd(0x30), rom | PCI_ROM_ADDRESS_ENABLE);
	ck_assert(!dev_written(0x30, 0x34));
	/* enabled: reads are the device's ROM region, through VFIO */
	regions = fake.region_reads;
	ck_assert(bus_access(&mmio, rom + 0x10, &v, 4, false));
	ck_assert_uint_eq(v, 0xd0000000 | VFIO_PCI_ROM_REGION << 24 | 0x10);
	ck_assert_uint_eq(fake.region_reads, regions + 1);
	/* past the ROM region, inside the BAR: all ones, the device not asked */
	ck_assert(bus_access(&mmio, rom + FAKE_ROM_SIZE, &v, 4, false));
	ck_assert_uint_eq(v, 0xffffffff);
	ck_assert_uint_eq(fake.region_reads, regions + 1);
	/* writes are dropped; the ROM is never guest memory */
	v = 0x12345678;
	bus_access(&mmio, rom + 0x10, &v, 4, true);
	ck_assert_uint_eq(fake.region_writes, 0);
	ck_assert_ptr_null(map_at(rom));
	/* memory decoding off, or the enable bit clear: gone again */
	cfg_wr16(0x04, 0);
	ck_assert(!bus_access(&mmio, rom + 0x10, &v, 4, false));
	cfg_wr16(0x04, PCI_COMMAND_MEMORY);
	ck_assert(bus_access(&mmio, rom + 0x10, &v, 4, false));
	cfg_wr(0x30, rom);
	ck_assert(!bus_access(&mmio, rom + 0x10, &v, 4, false));
	/* on another BAR: refused, not decoded */
	cfg_wr(0x30, (uint32_t)bar_addr(0, false) | PCI_ROM_ADDRESS_ENABLE);
	v = 0;
	bus_access(&mmio, bar_addr(0, false) + 0x10, &v, 4, false);
	ck_assert_uint_eq(v, 0xd0000010); /* still BAR0's register */
}
END_TEST

START_TEST(test_no_rom)
{
	fake.info.regions[VFIO_PCI_ROM_REGION].size = 0;
	plug();
	ck_assert_uint_eq(cfg_rd(0x30), 0);
	cfg_wr(0x30, 0xffffffff);
	ck_assert_uint_eq(cfg_rd(0x30), 0);
	ck_assert(!dev_written(0x30, 0x34));
}
END_TEST

START_TEST(test_ext_caps)
{
	unsigned off, ids[8], n = 0;

	plug();
	/* CF8 cannot reach it; ECAM can, and the chain skips SR-IOV and resizable BAR */
	for (off = 0x100; off && n < 8; off = ecam_rd(off, 4) >> 20) {
		ck_assert_uint_ge(off, 0x100);
		ids[n++] = ecam_rd(off, 4) & 0xffff;
	}
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(ids[0], 0x0001);
	ck_assert_uint_eq(ids[1], 0x000b);
	ck_assert_uint_eq(ecam_rd(FAKE_EXT_AER, 4), 0x0001 | 2 << 16 | FAKE_EXT_VSEC << 20);
	ck_assert_uint_eq(ecam_rd(FAKE_EXT_VSEC, 4), 0x000b | 1 << 16);
	/* kept capabilities' bodies are the device's, live */
	ck_assert_uint_eq(ecam_rd(FAKE_EXT_AER + 4, 4), 0x10);
	fake_put32(fake.cfg + FAKE_EXT_VSEC + 8, 0xcafe0001);
	ck_assert_uint_eq(ecam_rd(FAKE_EXT_VSEC + 8, 4), 0xcafe0001);
	ck_assert_uint_eq(ecam_rd(FAKE_EXT_VSEC + 10, 2), 0xcafe);
	/* hidden ones read zero everywhere */
	for (off = FAKE_EXT_SRIOV; off < FAKE_EXT_VSEC; off += 4)
		ck_assert_uint_eq(ecam_rd(off, 4), 0);
	ck_assert_uint_eq(ecam_rd(FAKE_EXT_REBAR + 4, 4), 0);
	ck_assert_uint_eq(ecam_rd(0xffc, 4), 0);
	/* writes: the device's registers reach it, headers and hidden capabilities never */
	fake.cfg_writes = 0;
	ecam_wr(FAKE_EXT_AER + 8, 0x00400000, 4); /* uncorrectable mask */
	ck_assert_uint_eq(fake.cfg_writes, 1);
	ck_assert_uint_eq(fake.cfg_log[0].off, FAKE_EXT_AER + 8);
	ck_assert_uint_eq(fake.cfg_log[0].len, 4);
	ecam_wr(FAKE_EXT_AER, 0xffffffff, 4);
	ecam_wr(FAKE_EXT_AER + 2, 0xffff, 2);
	ecam_wr(FAKE_EXT_SRIOV + 8, 0x1, 2); /* VF Enable */
	ecam_wr(FAKE_EXT_REBAR + 8, 0x1f00, 4);
	ecam_wr(0xffc, 0xffffffff, 4);
	ck_assert_uint_eq(fake.cfg_writes, 1);
	ck_assert_uint_eq(ecam_rd(FAKE_EXT_AER, 4) >> 20, FAKE_EXT_VSEC);
	/* a write across a header and a register: only the register's bytes, one at a time */
	ecam_wr(FAKE_EXT_VSEC + 2, 0x5678abcd, 4);
	ck_assert_uint_eq(fake.cfg_writes, 3);
	ck_assert_uint_eq(fake.cfg_log[1].off, FAKE_EXT_VSEC + 4);
	ck_assert_uint_eq(fake.cfg_log[1].val[0], 0x78);
	ck_assert_uint_eq(fake.cfg_log[2].off, FAKE_EXT_VSEC + 5);
	ck_assert_uint_eq(fake.cfg_log[2].val[0], 0x56);
	ck_assert_uint_eq(ecam_rd(FAKE_EXT_VSEC, 4), 0x000b | 1 << 16);
	fake.cfg_writes = 1;
	/* unaligned and oversized accesses at the very end stay inside */
	ck_assert_uint_eq(ecam_rd(0xffe, 4), 0);
	ecam_wr(0xffd, 0xffffffff, 4);
	ck_assert_uint_eq(fake.cfg_writes, 1);
}
END_TEST

START_TEST(test_ext_caps_first_hidden)
{
	char err[200];

	/* SR-IOV first: a null header at 0x100 leads to AER */
	memset(fake.cfg + 0x100, 0, 0x100);
	fake_put32(fake.cfg + 0x100, 0x0010 | 1 << 16 | 0x140 << 20);
	fake_put32(fake.cfg + 0x140, 0x0001 | 2 << 16);
	fake_put32(fake.cfg + 0x144, 0x77);
	plug();
	ck_assert_uint_eq(ecam_rd(0x100, 4), 0x140u << 20);
	ck_assert_uint_eq(ecam_rd(0x104, 4), 0);
	ck_assert_uint_eq(ecam_rd(0x140, 4), 0x0001 | 2 << 16);
	ck_assert_uint_eq(ecam_rd(0x144, 4), 0x77);
	vfio_pci_exit(&vp);
	devfn = 0;
	/* only hidden ones: an empty list */
	fake_vfio_init(&fake);
	fake_put32(fake.cfg + FAKE_EXT_AER, 0x000f | 1 << 16);
	plug();
	ck_assert_uint_eq(ecam_rd(0x100, 4), 0);
	vfio_pci_exit(&vp);
	devfn = 0;
	/* a conventional config region (256 bytes): extended space reads zero, writes go nowhere */
	fake_vfio_init(&fake);
	fake.info.regions[VFIO_PCI_CFG_REGION].size = 256;
	plug();
	fake.cfg_writes = 0;
	ck_assert_uint_eq(ecam_rd(FAKE_EXT_AER, 4), 0);
	ck_assert_uint_eq(ecam_rd(FAKE_EXT_AER + 4, 4), 0);
	ecam_wr(FAKE_EXT_AER + 8, 1, 4);
	ck_assert_uint_eq(fake.cfg_writes, 0);
	vfio_pci_exit(&vp);
	devfn = 0;
	/* a list that loops, or points below 0x100: refused */
	fake_vfio_init(&fake);
	fake_put32(fake.cfg + FAKE_EXT_REBAR, 0x0015 | 1 << 16 | FAKE_EXT_AER << 20);
	ck_assert_int_eq(build(err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "extended capability list broken"));
	fake_vfio_init(&fake);
	fake_put32(fake.cfg + FAKE_EXT_VSEC, 0x000b | 1 << 16 | 0x80 << 20);
	ck_assert_int_eq(build(err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "at 0x80"));
}
END_TEST

START_TEST(test_passthrough_writes)
{
	plug();
	fake.cfg_writes = 0;
	/* PM: the power state word is lvmm's, the bridge extension and data bytes the device's */
	cfg_wr(FAKE_PM_CAP + 4, 0xab008003);
	ck_assert_uint_eq(fake.cfg_writes, 2);
	ck_assert_uint_eq(fake.cfg_log[0].off, FAKE_PM_CAP + 6);
	ck_assert_uint_eq(fake.cfg_log[0].len, 1);
	ck_assert_uint_eq(fake.cfg_log[1].off, FAKE_PM_CAP + 7);
	ck_assert_uint_eq(fake.cfg[FAKE_PM_CAP + 7], 0xab);
	/* MSI-X control is lvmm's: nothing reaches the device */
	cfg_wr16(FAKE_MSIX_CAP + 2, PCI_MSIX_FLAGS_MASKALL);
	ck_assert_uint_eq(fake.cfg_writes, 2);
	/* a dword over the PCIe capability's ID/next (lvmm's) and flags (lvmm's) */
	cfg_wr(FAKE_PCIE_CAP, 0xffffffff);
	ck_assert_uint_eq(cfg_rd(FAKE_PCIE_CAP) & 0xffff, PCI_CAP_ID_EXP | FAKE_MSIX_CAP << 8);
	/* only the flags' high byte is the device's */
	ck_assert_uint_eq(fake.cfg_writes, 3);
	ck_assert_uint_eq(fake.cfg_log[2].off, FAKE_PCIE_CAP + 3);
	ck_assert_uint_eq(fake.cfg_log[2].len, 1);
}
END_TEST

START_TEST(test_command_register)
{
	uint16_t cmd;

	plug();
	/* pci_bus_add turned memory and mastering on; the device got them, with INTx off */
	memcpy(&cmd, fake.cfg + PCI_COMMAND, 2);
	ck_assert_uint_eq(cmd, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER | PCI_COMMAND_INTX_DISABLE);
	/* the guest turns decode off, and tries I/O */
	cfg_wr16(PCI_COMMAND, PCI_COMMAND_IO);
	memcpy(&cmd, fake.cfg + PCI_COMMAND, 2);
	ck_assert_uint_eq(cmd, PCI_COMMAND_INTX_DISABLE);
	ck_assert_uint_eq(nmaps(), 0); /* no decode: no BAR memory */
	cfg_wr16(PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	memcpy(&cmd, fake.cfg + PCI_COMMAND, 2);
	ck_assert_uint_eq(cmd, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER | PCI_COMMAND_INTX_DISABLE);
}
END_TEST

/* vfio-pci zaps the BAR mappings of a device that stops decoding: the guest loses them first */
START_TEST(test_decode_off_unmaps_first)
{
	plug();
	ck_assert_uint_eq(nmaps(), 3);
	unmap_cmd = -1;
	cfg_wr16(PCI_COMMAND, PCI_COMMAND_MASTER);
	ck_assert_int_ge(unmap_cmd, 0);
	ck_assert_uint_eq(unmap_cmd & PCI_COMMAND_MEMORY, PCI_COMMAND_MEMORY);
	ck_assert_uint_eq(fake.cfg[PCI_COMMAND] & PCI_COMMAND_MEMORY, 0);
	ck_assert_uint_eq(nmaps(), 0);
	/* on again: the device decodes, then the pieces come back */
	cfg_wr16(PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	ck_assert_uint_eq(fake.cfg[PCI_COMMAND] & PCI_COMMAND_MEMORY, PCI_COMMAND_MEMORY);
	ck_assert_uint_eq(nmaps(), 3);
	ck_assert_ptr_nonnull(map_at(bar_addr(0, false)));
}
END_TEST

/* D3hot would zap the mappings too: the power state is the guest's view, the device stays D0 */
START_TEST(test_pm_state_emulated)
{
	unsigned writes;

	plug();
	writes = fake.cfg_writes;
	cfg_wr16(FAKE_PM_CAP + PCI_PM_CTRL, 3);
	ck_assert_uint_eq(cfg_rd(FAKE_PM_CAP + PCI_PM_CTRL) & 3, 3);
	ck_assert_uint_eq(fake.cfg[FAKE_PM_CAP + PCI_PM_CTRL] & 3, 0);
	ck_assert_uint_eq(fake.cfg_writes, writes);
	ck_assert_uint_eq(nmaps(), 3);
	cfg_wr16(FAKE_PM_CAP + PCI_PM_CTRL, 0);
	ck_assert_uint_eq(cfg_rd(FAKE_PM_CAP + PCI_PM_CTRL) & 3, 0);
}
END_TEST

START_TEST(test_bar_pieces_follow)
{
	uint64_t b0, nb0 = LAYOUT_MMIO32_START + 0x10000000;

	plug();
	b0 = bar_addr(0, false);
	/* BAR0: around the MSI-X table and PBA pages; BAR1 whole; BAR3 trapped */
	ck_assert_ptr_nonnull(map_at(b0));
	ck_assert_uint_eq(map_at(b0)->size, FAKE_MSIX_TABLE);
	ck_assert_ptr_nonnull(map_at(b0 + FAKE_MSIX_PBA + 0x1000));
	ck_assert_uint_eq(map_at(b0 + FAKE_MSIX_PBA + 0x1000)->size,
			  FAKE_BAR0_SIZE - FAKE_MSIX_PBA - 0x1000);
	ck_assert_ptr_null(map_at(b0 + FAKE_MSIX_TABLE));
	ck_assert_ptr_nonnull(map_at(bar_addr(1, true)));
	ck_assert_uint_eq(map_at(bar_addr(1, true))->size, FAKE_BAR1_SIZE);
	ck_assert_uint_eq(nmaps(), 3);
	/* the guest moves BAR0: the pieces go with it */
	cfg_wr(0x10, (uint32_t)nb0);
	ck_assert_ptr_null(map_at(b0));
	ck_assert_ptr_nonnull(map_at(nb0));
	ck_assert_ptr_nonnull(map_at(nb0 + FAKE_MSIX_PBA + 0x1000));
	ck_assert_uint_eq(nmaps(), 3);
}
END_TEST

START_TEST(test_bar_trapped_accesses)
{
	uint64_t b0, b3;
	uint32_t v;

	plug();
	b0 = bar_addr(0, false);
	b3 = bar_addr(3, true);
	/* trapped BAR3 inside its region: the device */
	ck_assert(bus_access(&mmio, b3 + 0x10, &v, 4, false));
	ck_assert_uint_eq(v, 0xd3000010);
	v = 1;
	bus_access(&mmio, b3 + 0x7fc, &v, 4, true);
	ck_assert_uint_eq(fake.region_writes, 1);
	ck_assert_uint_eq(fake.last_write_off, 0x7fc);
	/* past the region, inside the page: all ones, nothing written */
	bus_access(&mmio, b3 + 0x800, &v, 4, false);
	ck_assert_uint_eq(v, 0xffffffff);
	bus_access(&mmio, b3 + 0xffc, &v, 4, true);
	ck_assert_uint_eq(fake.region_writes, 1);
	/* BAR0's MSI-X page outside the table: the device's registers */
	bus_access(&mmio, b0 + FAKE_MSIX_TABLE + 0x800, &v, 4, false);
	ck_assert_uint_eq(v, 0xd0000000 | (FAKE_MSIX_TABLE + 0x800));
}
END_TEST

START_TEST(test_msix_table_and_vfio)
{
	uint64_t b0;
	uint32_t v;

	plug();
	b0 = bar_addr(0, false);
	/* vector 3's entry through the BAR: lvmm's table, a route, nothing to the device */
	v = 0xfee01000;
	bus_access(&mmio, b0 + FAKE_MSIX_TABLE + 3 * 16, &v, 4, true);
	v = 0x4041;
	bus_access(&mmio, b0 + FAKE_MSIX_TABLE + 3 * 16 + 8, &v, 4, true);
	v = 0;
	bus_access(&mmio, b0 + FAKE_MSIX_TABLE + 3 * 16 + 12, &v, 4, true);
	ck_assert_uint_eq(fake.region_writes, 0);
	bus_access(&mmio, b0 + FAKE_MSIX_TABLE + 3 * 16 + 8, &v, 4, false);
	ck_assert_uint_eq(v, 0x4041);
	ck_assert(routes[vp.pci.msix.gsi[3]].set);
	ck_assert_uint_eq(routes[vp.pci.msix.gsi[3]].data, 0x4041);
	ck_assert(routes[vp.pci.msix.gsi[3]].masked); /* MSI-X still off */
	ck_assert_uint_eq(fake.irq_sets, 0);
	/* MSI-X on: VFIO gets the platform's eventfds for every vector */
	cfg_wr16(FAKE_MSIX_CAP + 2, PCI_MSIX_FLAGS_ENABLE);
	ck_assert_uint_eq(fake.irq_sets, 1);
	ck_assert_uint_eq(fake.irq_index, 2);
	ck_assert_uint_eq(fake.irq_count, FAKE_MSIX_NVEC);
	for (unsigned i = 0; i < FAKE_MSIX_NVEC; i++)
		ck_assert_int_eq(fake.irq_fds[i], vp.pci.msix.efd[i]);
	ck_assert(!routes[vp.pci.msix.gsi[3]].masked);
	ck_assert_int_eq(irqfds[vp.pci.msix.gsi[3]], vp.pci.msix.efd[3]);
	ck_assert_int_eq(irqfds[vp.pci.msix.gsi[2]], -1); /* still masked in its entry */
	/* the function mask is the guest's and stays in lvmm */
	cfg_wr16(FAKE_MSIX_CAP + 2, PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL);
	ck_assert_uint_eq(fake.irq_sets, 1);
	ck_assert_int_eq(irqfds[vp.pci.msix.gsi[3]], -1);
	/* off: VFIO's vectors are disabled */
	cfg_wr16(FAKE_MSIX_CAP + 2, 0);
	ck_assert_uint_eq(fake.irq_sets, 2);
	ck_assert_uint_eq(fake.irq_count, 0);
	/* PBA reads come from lvmm, writes are dropped */
	bus_access(&mmio, b0 + FAKE_MSIX_PBA, &v, 4, true);
	bus_access(&mmio, b0 + FAKE_MSIX_PBA, &v, 4, false);
	ck_assert_uint_eq(v, 0);
	ck_assert_uint_eq(fake.region_writes, 0);
}
END_TEST

static uint64_t efd_take(int fd)
{
	uint64_t n = 0;

	if (read(fd, &n, sizeof(n)) != sizeof(n))
		n = 0;
	return n;
}

/* MSI: lvmm's capability (4 vectors, 64-bit, per-vector masks); enabling hands VFIO the
 * platform's vector eventfds, masks keep a vector's signal as its pending bit until unmasked. */
START_TEST(test_msi)
{
	const unsigned c = FAKE_MSI_CAP;
	uint64_t one = 1;
	int gsi1;

	plug();
	ck_assert_uint_eq(cfg_rd(c) >> 16,
			  PCI_MSI_FLAGS_64BIT | PCI_MSI_FLAGS_MASKBIT | 2 << 1); /* off */
	fake.cfg_writes = 0;
	cfg_wr(c + 4, 0xfee01003); /* the low two bits are not the guest's */
	cfg_wr(c + 8, 0);
	cfg_wr(c + 12, 0x4020);
	ck_assert_uint_eq(cfg_rd(c + 4), 0xfee01000);
	ck_assert_uint_eq(fake.irq_sets, 0);
	/* four vectors (MME 2) on */
	cfg_wr16(c + 2, PCI_MSI_FLAGS_ENABLE | 2 << 4);
	ck_assert_uint_eq(fake.irq_sets, 1);
	ck_assert_uint_eq(fake.irq_index, 1);
	ck_assert_uint_eq(fake.irq_count, FAKE_MSI_NVEC);
	for (unsigned i = 0; i < FAKE_MSI_NVEC; i++) {
		ck_assert_int_eq(fake.irq_fds[i], vp.pci.msi.efd[i]);
		ck_assert(!routes[vp.pci.msi.gsi[i]].masked);
		ck_assert_uint_eq(routes[vp.pci.msi.gsi[i]].addr, 0xfee01000);
		ck_assert_uint_eq(routes[vp.pci.msi.gsi[i]].data, 0x4020 | i);
		ck_assert_int_eq(irqfds[vp.pci.msi.gsi[i]], vp.pci.msi.efd[i]);
	}
	/* vector 1 masked: out of KVM; what the device signals then is pending */
	gsi1 = vp.pci.msi.gsi[1];
	cfg_wr(c + 16, 1u << 1);
	ck_assert_int_eq(irqfds[gsi1], -1);
	ck_assert(routes[gsi1].masked);
	ck_assert_int_eq(write(vp.pci.msi.efd[1], &one, sizeof(one)), sizeof(one));
	cfg_wr(c + 16, 1u << 1);
	ck_assert_uint_eq(cfg_rd(c + 20), 1u << 1);
	/* unmasked: routed again, the pending signal delivered on its eventfd */
	cfg_wr(c + 16, 0);
	ck_assert_int_eq(irqfds[gsi1], vp.pci.msi.efd[1]);
	ck_assert_uint_eq(cfg_rd(c + 20), 0);
	ck_assert_uint_eq(efd_take(vp.pci.msi.efd[1]), 1);
	/* bus mastering off masks every vector */
	cfg_wr16(PCI_COMMAND, PCI_COMMAND_MEMORY);
	ck_assert_int_eq(irqfds[vp.pci.msi.gsi[0]], -1);
	cfg_wr16(PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	/* more vectors than offered: clamped to 4 */
	cfg_wr16(c + 2, PCI_MSI_FLAGS_ENABLE | 5 << 4);
	ck_assert_uint_eq(vp.pci.msi.enabled, FAKE_MSI_NVEC);
	/* off */
	cfg_wr16(c + 2, 0);
	ck_assert_uint_eq(fake.irq_count, 0);
	ck_assert_uint_eq(vp.pci.msi.enabled, 0);
	/* none of it reached the device's config space but the command register */
	for (unsigned i = 0; i < fake.cfg_writes && i < FAKE_MAX_LOG; i++)
		ck_assert_uint_eq(fake.cfg_log[i].off, PCI_COMMAND);
}
END_TEST

START_TEST(test_msix_hostile_accesses)
{
	uint64_t b0;
	uint32_t v = 0xffffffff;
	uint8_t b = 0xff;
	uint64_t q = ~0ULL;

	plug();
	b0 = bar_addr(0, false);
	/* unaligned, byte-wide and straddling accesses to the table are dropped */
	bus_access(&mmio, b0 + FAKE_MSIX_TABLE + 2, &v, 4, true);
	bus_access(&mmio, b0 + FAKE_MSIX_TABLE + 13, &b, 1, true);
	bus_access(&mmio, b0 + FAKE_MSIX_TABLE + FAKE_MSIX_NVEC * 16 - 4, &q, 8, true);
	for (unsigned i = 0; i < FAKE_MSIX_NVEC; i++)
		ck_assert_uint_eq(vp.pci.msix.table[i].ctrl, PCI_MSIX_ENTRY_CTRL_MASKBIT);
	ck_assert_uint_eq(fake.region_writes, 0);
	/* a qword over the last entry's data and control */
	q = 0x0000000000001234ULL | (uint64_t)0xfffffffe << 32;
	bus_access(&mmio, b0 + FAKE_MSIX_TABLE + (FAKE_MSIX_NVEC - 1) * 16 + 8, &q, 8, true);
	ck_assert_uint_eq(vp.pci.msix.table[FAKE_MSIX_NVEC - 1].data, 0x1234);
	ck_assert_uint_eq(vp.pci.msix.table[FAKE_MSIX_NVEC - 1].ctrl, 0);
}
END_TEST

START_TEST(test_mmap_refused_traps)
{
	uint64_t b0;
	uint32_t v;

	fake.fail_mmap = EPERM;
	plug();
	ck_assert_uint_eq(nmaps(), 0);
	b0 = bar_addr(0, false);
	bus_access(&mmio, b0 + 0x100, &v, 4, false);
	ck_assert_uint_eq(v, 0xd0000100);
}
END_TEST

/* GPUs with 256 GiB BAR1s: the 64-bit window grows to hold them all while the boot devices are
 * placed, the firmware sees its final size, and a hot-added one that does not fit is refused. */
START_TEST(test_mmio64_window_grows)
{
	static struct fake_vfio fk[3];
	static struct vfio_pci gpu[3];
	uint64_t big = 256ULL << 30, size;
	char err[200];

	pci_bus_mmio64_limit(&pb, 4ULL << 40);
	for (unsigned i = 0; i < 3; i++) {
		fake_vfio_init(&fk[i]);
		fk[i].info.regions[1].size = big;
		fk[i].info.regions[1].sparse[0].size = big;
		ck_assert_msg(vfio_pci_init(&gpu[i], "gpu", &fk[i].info, &fake_vfio_ops, &fk[i],
					    &host, err, sizeof(err)) == 0,
			      "%s", err);
	}
	for (unsigned i = 0; i < 2; i++)
		ck_assert_msg(pci_bus_add(&pb, &gpu[i].pci, err, sizeof(err)) == 0, "%s", err);
	size = pci_bus_mmio64_seal(&pb);
	ck_assert_uint_ge(size, 2 * big);
	ck_assert_uint_le(size, 4ULL << 40);
	for (unsigned i = 0; i < 2; i++) {
		uint64_t a = gpu[i].pci.bar[1].mapped_addr;

		ck_assert(gpu[i].pci.bar[1].mapped);
		ck_assert_uint_ge(a, LAYOUT_MMIO64_START);
		ck_assert_uint_le(a + big, LAYOUT_MMIO64_START + size);
		ck_assert_ptr_nonnull(map_at(a));
	}
	/* sealed: a third only if it fits what the guest was told */
	if (size < 3 * big + (1ULL << 30)) {
		ck_assert_int_eq(pci_bus_add(&pb, &gpu[2].pci, err, sizeof(err)), -ENOSPC);
		ck_assert_ptr_nonnull(strstr(err, "does not fit the window"));
	}
	vfio_pci_exit(&gpu[2]);
	for (unsigned i = 0; i < 2; i++)
		vfio_pci_exit(&gpu[i]);
	ck_assert_uint_eq(nmaps(), 0);
}
END_TEST

START_TEST(test_refused_devices)
{
	char err[200];

	/* a bridge */
	fake.cfg[PCI_HEADER_TYPE] = 1;
	ck_assert_int_eq(build(err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "header type 0x01"));
	/* a capability list that loops */
	fake_vfio_init(&fake);
	fake.cfg[FAKE_VNDR_CAP + 1] = FAKE_PM_CAP;
	ck_assert_int_eq(build(err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "capability list broken"));
	/* a pointer into the header */
	fake_vfio_init(&fake);
	fake.cfg[FAKE_PM_CAP + 1] = 0x10;
	ck_assert_int_eq(build(err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "at 0x10"));
	/* an MSI-X table beyond its BAR */
	fake_vfio_init(&fake);
	fake_put32(fake.cfg + FAKE_MSIX_CAP + PCI_MSIX_TABLE, 0x00fffff8);
	ck_assert_int_eq(build(err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "outside its BAR"));
	/* an MSI-X table in the I/O BAR, which is not passed through */
	fake_vfio_init(&fake);
	fake_put32(fake.cfg + FAKE_MSIX_CAP + PCI_MSIX_TABLE, 5);
	ck_assert_int_eq(build(err, sizeof(err)), -EINVAL);
	/* a 64-bit BAR5 */
	fake_vfio_init(&fake);
	fake_put32(fake.cfg + 0x24, PCI_BAR_MEM_TYPE_64);
	ck_assert_int_eq(build(err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "BAR5"));
	/* config space the device does not give */
	fake_vfio_init(&fake);
	fake.info.regions[1].size = 1ULL << 41;
	ck_assert_int_eq(build(err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "exceeds 1 TiB"));
}
END_TEST

/* MSI and MSI-X exclude each other: the second enable does not stick and never reaches VFIO */
START_TEST(test_msi_msix_exclusive)
{
	plug();
	cfg_wr16(FAKE_MSIX_CAP + 2, PCI_MSIX_FLAGS_ENABLE);
	ck_assert(vp.msix_on);
	fake.irq_sets = 0;
	cfg_wr16(FAKE_MSI_CAP + 2, PCI_MSI_FLAGS_ENABLE);
	ck_assert_uint_eq(cfg_rd(FAKE_MSI_CAP) >> 16 & PCI_MSI_FLAGS_ENABLE, 0);
	ck_assert_uint_eq(vp.msi_on, 0);
	ck_assert_uint_eq(fake.irq_sets, 0);
	/* the other way round */
	cfg_wr16(FAKE_MSIX_CAP + 2, 0);
	ck_assert(!vp.msix_on);
	cfg_wr16(FAKE_MSI_CAP + 2, PCI_MSI_FLAGS_ENABLE);
	ck_assert_uint_eq(vp.msi_on, 1);
	fake.irq_sets = 0;
	cfg_wr16(FAKE_MSIX_CAP + 2, PCI_MSIX_FLAGS_ENABLE);
	ck_assert_uint_eq(cfg_rd(FAKE_MSIX_CAP) >> 16 & PCI_MSIX_FLAGS_ENABLE, 0);
	ck_assert(!vp.msix_on);
	ck_assert_uint_eq(fake.irq_sets, 0);
}
END_TEST

/* A guest repeating a failing enable gets a few lines on stderr, not one each time. */
START_TEST(test_failures_logged_sparsely)
{
	FILE *log = tmpfile();
	char line[256];
	int saved, n = 0;

	plug();
	fake.fail_irq = -ENOSPC;
	ck_assert_ptr_nonnull(log);
	fflush(stderr);
	saved = dup(2);
	ck_assert_int_ge(dup2(fileno(log), 2), 0);
	for (unsigned i = 0; i < 20; i++) {
		cfg_wr16(FAKE_MSIX_CAP + 2, PCI_MSIX_FLAGS_ENABLE);
		cfg_wr16(FAKE_MSIX_CAP + 2, 0);
	}
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	ck_assert_uint_eq(vp.irq_errors, 20);
	rewind(log);
	while (fgets(line, sizeof(line), log))
		n += strstr(line, "MSI-X enable") != NULL;
	fclose(log);
	ck_assert_int_eq(n, 9); /* failures 1..8 and 16 */
}
END_TEST

/* The 64-bit window stops at the narrower of host and guest, and never guesses wider. */
START_TEST(test_mmio64_limit_widths)
{
	ck_assert_uint_eq(devices_mmio64_max(46, 52), (1ULL << 46) - LAYOUT_MMIO64_START);
	ck_assert_uint_eq(devices_mmio64_max(52, 43), (1ULL << 43) - LAYOUT_MMIO64_START);
	ck_assert_uint_eq(devices_mmio64_max(52, 52), (1ULL << 48) - LAYOUT_MMIO64_START);
	/* a narrow host stays narrow: no fallback up to 46 bits */
	ck_assert_uint_eq(devices_mmio64_max(0, 42), (1ULL << 42) - LAYOUT_MMIO64_START);
	ck_assert_uint_eq(devices_mmio64_max(39, 48), 0);
	ck_assert_uint_eq(devices_mmio64_max(48, 36), 0);
	ck_assert_uint_eq(devices_mmio64_max(0, 0), 0);
}
END_TEST

/* A second MSI-X capability is unlinked, and its bytes are not the device's to the guest */
START_TEST(test_dropped_cap_hidden)
{
	unsigned off, n = 0, writes;

	fake.cfg[FAKE_VNDR_CAP] = PCI_CAP_ID_MSIX;
	fake_put32(fake.cfg + FAKE_VNDR_CAP + 4, 0x12345678);
	plug();
	for (off = cfg_rd(0x34) & 0xff; off && n < 8; off = cfg_rd(off) >> 8 & 0xff, n++)
		ck_assert_uint_ne(off, FAKE_VNDR_CAP);
	ck_assert_uint_eq(n, 4);
	for (off = FAKE_VNDR_CAP; off < FAKE_VNDR_CAP + 12; off += 4)
		ck_assert_uint_eq(cfg_rd(off), 0);
	writes = fake.cfg_writes;
	cfg_wr(FAKE_VNDR_CAP + 4, 0xffffffff);
	cfg_wr(FAKE_VNDR_CAP, 0xffffffff);
	ck_assert_uint_eq(fake.cfg_writes, writes);
	ck_assert_uint_eq(cfg_rd(FAKE_VNDR_CAP + 4), 0);
}
END_TEST

/* The guest's FLR reaches the device, and lvmm's side of the function resets with it */
START_TEST(test_guest_flr)
{
	unsigned writes, i;
	bool devctl = false;

	plug();
	cfg_wr16(FAKE_MSIX_CAP + 2, PCI_MSIX_FLAGS_ENABLE);
	ck_assert(vp.msix_on);
	ck_assert_uint_eq(nmaps(), 3);
	unmap_cmd = -1;
	writes = fake.cfg_writes;
	cfg_wr16(FAKE_PCIE_CAP + PCI_EXP_DEVCTL, PCI_EXP_DEVCTL_BCR_FLR);
	for (i = writes; i < fake.cfg_writes && i < FAKE_MAX_LOG; i++)
		devctl |= fake.cfg_log[i].off == FAKE_PCIE_CAP + PCI_EXP_DEVCTL;
	ck_assert(devctl);
	ck_assert_uint_eq(vp.pci.flrs, 1);
	/* the mappings left while the device still decoded */
	ck_assert_int_ge(unmap_cmd, 0);
	ck_assert_uint_eq(unmap_cmd & PCI_COMMAND_MEMORY, PCI_COMMAND_MEMORY);
	ck_assert_uint_eq(nmaps(), 0);
	/* command, MSI-X: reset values, in lvmm and in the device */
	ck_assert_uint_eq(cfg_rd(PCI_COMMAND) & 0xffff, 0);
	ck_assert_uint_eq(fake.cfg[PCI_COMMAND] & (PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER), 0);
	ck_assert_uint_eq(cfg_rd(FAKE_MSIX_CAP) >> 16 & PCI_MSIX_FLAGS_ENABLE, 0);
	ck_assert(!vp.msix_on);
	ck_assert_uint_eq(fake.irq_count, 0);
}
END_TEST

/* A function the VM holds already is not opened (and reset) a second time. */
START_TEST(test_host_open_twice)
{
	static struct vfio_host vh;
	struct guest_mem gm = {0};
	char err[160];

	vfio_host_init(&vh, &gm);
	vh.devs[0].open = true;
	snprintf(vh.devs[0].bdf, sizeof(vh.devs[0].bdf), "0000:00:04.0");
	ck_assert_ptr_null(vfio_host_open(&vh, "0000:00:04.0", err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "0000:00:04.0 is passed through to this VM already"));
	ck_assert_ptr_null(vh.c); /* refused before any container was opened */
}
END_TEST

static Suite *vfio_pci_suite(void)
{
	Suite *s = suite_create("vfio_pci");
	TCase *t = tcase_create("model");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_header_emulated);
	tcase_add_test(t, test_bar_sizing);
	tcase_add_test(t, test_bar_placement);
	tcase_add_test(t, test_caps_chain);
	tcase_add_test(t, test_rom_bar);
	tcase_add_test(t, test_no_rom);
	tcase_add_test(t, test_ext_caps);
	tcase_add_test(t, test_ext_caps_first_hidden);
	tcase_add_test(t, test_passthrough_writes);
	tcase_add_test(t, test_command_register);
	tcase_add_test(t, test_decode_off_unmaps_first);
	tcase_add_test(t, test_pm_state_emulated);
	tcase_add_test(t, test_bar_pieces_follow);
	tcase_add_test(t, test_bar_trapped_accesses);
	tcase_add_test(t, test_msix_table_and_vfio);
	tcase_add_test(t, test_msi);
	tcase_add_test(t, test_msix_hostile_accesses);
	tcase_add_test(t, test_mmap_refused_traps);
	tcase_add_test(t, test_mmio64_window_grows);
	tcase_add_test(t, test_refused_devices);
	tcase_add_test(t, test_host_open_twice);
	tcase_add_test(t, test_guest_flr);
	tcase_add_test(t, test_dropped_cap_hidden);
	tcase_add_test(t, test_mmio64_limit_widths);
	tcase_add_test(t, test_msi_msix_exclusive);
	tcase_add_test(t, test_failures_logged_sparsely);
	tcase_set_timeout(t, 60);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return testutil_run_suite(vfio_pci_suite());
}
