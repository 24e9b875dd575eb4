/* PCI platform tests without KVM: config space through CF8/CFC and ECAM on real buses, BAR size
 * probing and moves, capability list, MSI-X table writes -> routes, masking and the PBA. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layout.h"
#include "pci.h"
#include "testutil.h"

static struct bus pio, mmio;
static struct pci_bus pb;
static struct pci_dev dev;
static int next_gsi;
static struct route {
	bool set, masked;
	uint64_t addr;
	uint32_t data;
} routes[64];
static int irqfds[64];
static uint32_t mmio_hits;

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

static void bar_read(void *o, uint64_t off, void *data, unsigned len)
{
	uint32_t v = 0xab000000u | (uint32_t)off;

	mmio_hits++;
	memcpy(data, &v, len < 4 ? len : 4);
}

static void bar_write(void *o, uint64_t off, const void *data, unsigned len)
{
	mmio_hits++;
}

static const struct bus_ops bar_ops = {.read = bar_read, .write = bar_write};

static void setup(void)
{
	struct pci_platform_ops ops = {
	    .alloc_gsi = fake_alloc_gsi, .set_msi_route = fake_route, .irqfd = fake_irqfd};
	uint8_t vcap[8] = {PCI_CAP_ID_VNDR, 0, 8, 1, 'L', 'I', 'O', 'V'};
	char err[128];

	bus_init(&pio);
	bus_init(&mmio);
	next_gsi = 24;
	memset(routes, 0, sizeof(routes));
	memset(irqfds, 0xff, sizeof(irqfds));
	mmio_hits = 0;
	ck_assert_int_eq(pci_bus_init(&pb, &ops, &pio, &mmio, err, sizeof(err)), 0);
	pci_dev_init(&dev, "nvme0", 0x1b36, 0x0110, 0x010802, 0x1b36, 0x0110);
	ck_assert_int_eq(pci_dev_add_bar(&dev, 0, 0x4000, true, false, &bar_ops, NULL, NULL), 0);
	ck_assert_int_eq(pci_dev_add_msix(&dev, 4, 4, err, sizeof(err)), 0);
	ck_assert_int_gt(pci_dev_add_cap(&dev, vcap, sizeof(vcap)), 0);
	ck_assert_int_eq(pci_bus_add(&pb, &dev, err, sizeof(err)), 0);
}

static void teardown(void)
{
	pci_dev_exit(&dev);
	pci_bus_exit(&pb);
}

static uint32_t cfg_rd(unsigned devfn, unsigned reg)
{
	uint32_t a = 0x80000000u | devfn << 8 | (reg & 0xfc), v;

	bus_access(&pio, LAYOUT_PCI_CONF_ADDR, &a, 4, true);
	bus_access(&pio, LAYOUT_PCI_CONF_DATA, &v, 4, false);
	return v;
}

static void cfg_wr(unsigned devfn, unsigned reg, uint32_t v)
{
	uint32_t a = 0x80000000u | devfn << 8 | (reg & 0xfc);

	bus_access(&pio, LAYOUT_PCI_CONF_ADDR, &a, 4, true);
	bus_access(&pio, LAYOUT_PCI_CONF_DATA, &v, 4, true);
}

static uint64_t bar64(unsigned devfn, unsigned bar)
{
	return (cfg_rd(devfn, 0x10 + 4 * bar) & ~0xfULL) | (uint64_t)cfg_rd(devfn, 0x14 + 4 * bar)
							       << 32;
}

START_TEST(test_host_bridge_and_absent)
{
	uint32_t v, a = 0x00000000;
	uint16_t w;

	ck_assert_uint_eq(cfg_rd(0, 0), 0x00081b36);
	ck_assert_uint_eq(cfg_rd(0, 8) >> 8, 0x060000);
	ck_assert_uint_eq(cfg_rd(2 << 3, 0), 0xffffffff);     /* empty slot */
	ck_assert_uint_eq(cfg_rd(1 << 3 | 1, 0), 0xffffffff); /* function 1 */
	ck_assert_uint_eq(cfg_rd(1 << 3, 0), 0x01101b36);
	ck_assert_uint_eq(cfg_rd(1 << 3, 8) >> 8, 0x010802);
	/* Enable bit clear: no config cycle. */
	bus_access(&pio, LAYOUT_PCI_CONF_ADDR, &a, 4, true);
	bus_access(&pio, LAYOUT_PCI_CONF_DATA, &v, 4, false);
	ck_assert_uint_eq(v, 0xffffffff);
	/* Sub-dword access through CFC+2. */
	a = 0x80000000u | 1 << 11;
	bus_access(&pio, LAYOUT_PCI_CONF_ADDR, &a, 4, true);
	bus_access(&pio, LAYOUT_PCI_CONF_DATA + 2, &w, 2, false);
	ck_assert_uint_eq(w, 0x0110);
	/* Read-only fields stay. */
	cfg_wr(1 << 3, 0, 0x12345678);
	ck_assert_uint_eq(cfg_rd(1 << 3, 0), 0x01101b36);
}
END_TEST

START_TEST(test_ecam)
{
	uint32_t v;

	ck_assert(bus_access(&mmio, LAYOUT_ECAM_START + (1 << 15), &v, 4, false));
	ck_assert_uint_eq(v, 0x01101b36);
	bus_access(&mmio, LAYOUT_ECAM_START + (1 << 15) + 0x100, &v, 4, false);
	ck_assert_uint_eq(v, 0); /* extended space */
	bus_access(&mmio, LAYOUT_ECAM_START + (3 << 15), &v, 4, false);
	ck_assert_uint_eq(v, 0xffffffff);
}
END_TEST

START_TEST(test_bar_probe_and_move)
{
	uint64_t a = bar64(1 << 3, 0), na = LAYOUT_MMIO64_START + 0x40000000;
	uint32_t v, bar4 = cfg_rd(1 << 3, 0x20);

	/* Not prefetchable: placed in the 32-bit hole, naturally aligned. */
	ck_assert_uint_ge(a, LAYOUT_MMIO32_START);
	ck_assert_uint_lt(a + 0x4000, LAYOUT_MMIO32_START + LAYOUT_MMIO32_SIZE + 1);
	ck_assert_uint_eq(a & 0x3fff, 0);
	ck_assert_uint_eq(cfg_rd(1 << 3, 4) & PCI_COMMAND_MEMORY, PCI_COMMAND_MEMORY);
	ck_assert(bus_access(&mmio, a + 0x10, &v, 4, false));
	ck_assert_uint_eq(v, 0xab000010);
	/* Size probe as Linux does it: decode off, all ones, read back, restore. */
	cfg_wr(1 << 3, 4, 0);
	ck_assert(!bus_access(&mmio, a + 0x10, &v, 4, false));
	cfg_wr(1 << 3, 0x10, 0xffffffff);
	cfg_wr(1 << 3, 0x14, 0xffffffff);
	ck_assert_uint_eq(cfg_rd(1 << 3, 0x10), 0xffffc004);
	ck_assert_uint_eq(cfg_rd(1 << 3, 0x14), 0xffffffff);
	/* Unimplemented BARs read 0 even after all ones. */
	cfg_wr(1 << 3, 0x18, 0xffffffff);
	ck_assert_uint_eq(cfg_rd(1 << 3, 0x18), 0);
	/* MSI-X BAR (4/5): 64-bit, 8 KiB (table page + PBA page) */
	cfg_wr(1 << 3, 0x20, 0xffffffff);
	ck_assert_uint_eq(cfg_rd(1 << 3, 0x20), 0xffffe004);
	/* Move BAR0 and turn decoding back on. */
	cfg_wr(1 << 3, 0x10, (uint32_t)na);
	cfg_wr(1 << 3, 0x14, (uint32_t)(na >> 32));
	cfg_wr(1 << 3, 0x20, bar4);
	cfg_wr(1 << 3, 4, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	ck_assert(!bus_access(&mmio, a + 0x10, &v, 4, false));
	ck_assert(bus_access(&mmio, na + 0x20, &v, 4, false));
	ck_assert_uint_eq(v, 0xab000020);
	/* Through ECAM the move happens on the bus's remap worker: wait for it. */
	cfg_wr(1 << 3, 4, 0);
	v = PCI_COMMAND_MEMORY;
	bus_access(&mmio, LAYOUT_ECAM_START + (1 << 15) + 4, &v, 4, true);
	pci_bus_remap_flush(&pb);
	ck_assert(bus_access(&mmio, na, &v, 4, false));
	ck_assert_uint_eq(v, 0xab000000);
}
END_TEST

START_TEST(test_capabilities)
{
	uint32_t ptr = cfg_rd(1 << 3, 0x34) & 0xff, hdr;

	ck_assert_uint_ne(cfg_rd(1 << 3, 4) >> 16 & PCI_STATUS_CAP_LIST, 0);
	ck_assert_uint_eq(ptr, 0x40);
	hdr = cfg_rd(1 << 3, ptr);
	ck_assert_uint_eq(hdr & 0xff, PCI_CAP_ID_MSIX);
	ck_assert_uint_eq(hdr >> 16 & 0x7ff, 3);		/* table size 4, 0's based */
	ck_assert_uint_eq(cfg_rd(1 << 3, ptr + 4), 4);		/* table at 0 in BAR4 */
	ck_assert_uint_eq(cfg_rd(1 << 3, ptr + 8), 0x1000 | 4); /* PBA */
	ptr = hdr >> 8 & 0xff;
	ck_assert_uint_ne(ptr, 0);
	ck_assert_uint_eq(cfg_rd(1 << 3, ptr) & 0xff, PCI_CAP_ID_VNDR);
	ck_assert_uint_eq(cfg_rd(1 << 3, ptr) >> 8 & 0xff, 0); /* end of list */
}
END_TEST

static void table_wr(uint64_t base, unsigned v, unsigned field, uint32_t val)
{
	bus_access(&mmio, base + v * 16 + field * 4, &val, 4, true);
}

static uint64_t efd_count(int fd)
{
	uint64_t n = 0;

	if (read(fd, &n, sizeof(n)) != sizeof(n))
		return 0;
	return n;
}

START_TEST(test_msix_routes_and_masking)
{
	uint64_t t = bar64(1 << 3, 4);
	unsigned cap = 0x40;
	uint32_t v, pba;
	int gsi = dev.msix.gsi[1];

	ck_assert_int_ge(gsi, 24);
	ck_assert_int_eq(irqfds[gsi], -1); /* masked: the eventfd is not KVM's */
	/* Vectors start masked. */
	bus_access(&mmio, t + 16 + 12, &v, 4, false);
	ck_assert_uint_eq(v, 1);
	table_wr(t, 1, 0, 0xfee01000);
	table_wr(t, 1, 1, 0);
	table_wr(t, 1, 2, 0x4041);
	/* MSI-X disabled: notifications pend. */
	pci_msix_notify(&dev, 1);
	ck_assert_uint_eq(efd_count(dev.msix.efd[1]), 0);
	bus_access(&mmio, t + 0x1000, &pba, 4, false);
	ck_assert_uint_eq(pba, 2);
	/* Enable MSI-X, unmask the entry: the route is programmed, the pending one delivered. */
	cfg_wr(1 << 3, cap, cfg_rd(1 << 3, cap) | (uint32_t)PCI_MSIX_FLAGS_ENABLE << 16);
	ck_assert(routes[gsi].masked);
	table_wr(t, 1, 3, 0);
	ck_assert(routes[gsi].set && !routes[gsi].masked);
	ck_assert_uint_eq(routes[gsi].addr, 0xfee01000);
	ck_assert_uint_eq(routes[gsi].data, 0x4041);
	ck_assert_uint_eq(efd_count(dev.msix.efd[1]), 1);
	bus_access(&mmio, t + 0x1000, &pba, 4, false);
	ck_assert_uint_eq(pba, 0);
	pci_msix_notify(&dev, 1);
	ck_assert_uint_eq(efd_count(dev.msix.efd[1]), 1);
	/* Function mask pends again; out-of-range vectors are ignored. */
	cfg_wr(1 << 3, cap, cfg_rd(1 << 3, cap) | (uint32_t)PCI_MSIX_FLAGS_MASKALL << 16);
	ck_assert(routes[gsi].masked);
	pci_msix_notify(&dev, 1);
	pci_msix_notify(&dev, 9);
	ck_assert_uint_eq(efd_count(dev.msix.efd[1]), 0);
	cfg_wr(1 << 3, cap, (cfg_rd(1 << 3, cap) & 0xffff) | (uint32_t)PCI_MSIX_FLAGS_ENABLE << 16);
	ck_assert_uint_eq(efd_count(dev.msix.efd[1]), 1);
	/* Writes to the PBA or beyond the table change nothing. */
	v = 0xffffffff;
	bus_access(&mmio, t + 0x1000, &v, 4, true);
	bus_access(&mmio, t + 0x1000, &pba, 4, false);
	ck_assert_uint_eq(pba, 0);
	bus_access(&mmio, t + 4 * 16, &v, 4, true);
	bus_access(&mmio, t + 4 * 16, &v, 4, false);
	ck_assert_uint_eq(v, 0);
}
END_TEST

/* A backend (softssd, lightiov.ko) signals the vector's eventfd itself: while masked that
 * signal must become the PBA bit, and the interrupt must arrive on unmask. */
START_TEST(test_msix_masked_backend_signal)
{
	uint64_t t = bar64(1 << 3, 4), one = 1;
	unsigned cap = 0x40;
	int gsi = dev.msix.gsi[2];
	uint32_t pba;

	table_wr(t, 2, 0, 0xfee00000);
	table_wr(t, 2, 2, 0x4042);
	cfg_wr(1 << 3, cap, cfg_rd(1 << 3, cap) | (uint32_t)PCI_MSIX_FLAGS_ENABLE << 16);
	table_wr(t, 2, 3, 0);
	ck_assert_int_eq(irqfds[gsi], dev.msix.efd[2]);
	ck_assert(!routes[gsi].masked);
	/* Unmasked: the backend's signal is KVM's alone; lvmm neither reads nor pends it. */
	ck_assert_int_eq(write(dev.msix.efd[2], &one, sizeof(one)), 8);
	bus_access(&mmio, t + 0x1000, &pba, 4, false);
	ck_assert_uint_eq(pba, 0);
	ck_assert_uint_eq(efd_count(dev.msix.efd[2]), 1);
	/* Masked: out of KVM's route, the completion's signal shows in the PBA. */
	table_wr(t, 2, 3, 1);
	ck_assert_int_eq(irqfds[gsi], -1);
	ck_assert(routes[gsi].masked);
	ck_assert_int_eq(write(dev.msix.efd[2], &one, sizeof(one)), 8);
	ck_assert_int_eq(write(dev.msix.efd[2], &one, sizeof(one)), 8);
	bus_access(&mmio, t + 0x1000, &pba, 4, false);
	ck_assert_uint_eq(pba, 1u << 2);
	ck_assert_uint_eq(dev.msix.pended, 1);
	/* Unmask: the eventfd goes back to KVM and one interrupt is raised on it. */
	table_wr(t, 2, 3, 0);
	ck_assert_int_eq(irqfds[gsi], dev.msix.efd[2]);
	ck_assert(!routes[gsi].masked);
	bus_access(&mmio, t + 0x1000, &pba, 4, false);
	ck_assert_uint_eq(pba, 0);
	ck_assert_uint_eq(efd_count(dev.msix.efd[2]), 1);
	/* Unmask without a PBA read in between: the signal still arrives. */
	cfg_wr(1 << 3, cap, cfg_rd(1 << 3, cap) | (uint32_t)PCI_MSIX_FLAGS_MASKALL << 16);
	ck_assert_int_eq(irqfds[gsi], -1);
	ck_assert_int_eq(write(dev.msix.efd[2], &one, sizeof(one)), 8);
	cfg_wr(1 << 3, cap, (cfg_rd(1 << 3, cap) & 0xffff) | (uint32_t)PCI_MSIX_FLAGS_ENABLE << 16);
	ck_assert_int_eq(irqfds[gsi], dev.msix.efd[2]);
	ck_assert_uint_eq(efd_count(dev.msix.efd[2]), 1);
	ck_assert_uint_eq(dev.msix.pended, 2);
}
END_TEST

static unsigned flr_calls;
static uint16_t flr_cmd_seen;

static void on_flr(struct pci_dev *d)
{
	uint16_t cmd;

	flr_calls++;
	/* the device resets behind a function that already decodes nothing */
	memcpy(&cmd, d->cfg + PCI_COMMAND, 2);
	flr_cmd_seen = cmd;
}

/* Function Level Reset through the PCIe capability: advertised in Device Capabilities; the
 * Initiate FLR write resets config space (command, BARs, MSI-X), masks every vector, drops what
 * was pending, unmaps the BARs and calls the device's reset once; the bit reads back 0. */
START_TEST(test_flr)
{
	struct pci_dev d2;
	uint64_t t, one = 1;
	uint32_t v, pba;
	char err[128];
	int exp, gsi;
	unsigned cap = 0x40;

	pci_dev_init(&d2, "flr", 0x1b36, 0x0110, 0x010802, 0x1b36, 0x0110);
	ck_assert_int_eq(pci_dev_add_bar(&d2, 0, 0x4000, true, false, &bar_ops, NULL, NULL), 0);
	ck_assert_int_eq(pci_dev_add_msix(&d2, 2, 4, err, sizeof(err)), 0);
	exp = pci_dev_add_flr(&d2, on_flr);
	ck_assert_int_gt(exp, 0x40);
	ck_assert_int_eq(pci_bus_add(&pb, &d2, err, sizeof(err)), 0);
	flr_calls = 0;
	ck_assert_uint_eq(cfg_rd(2 << 3, exp) & 0xff, PCI_CAP_ID_EXP);
	ck_assert_uint_eq(cfg_rd(2 << 3, exp) >> 16 & 0xf0, PCI_EXP_TYPE_RC_END << 4);
	ck_assert(cfg_rd(2 << 3, exp + PCI_EXP_DEVCAP) & PCI_EXP_DEVCAP_FLR);
	/* a working function: decoding, MSI-X on, vector 1 unmasked and pending-capable */
	t = bar64(2 << 3, 4);
	ck_assert_uint_ne(bar64(2 << 3, 0), 0);
	cfg_wr(2 << 3, cap, cfg_rd(2 << 3, cap) | (uint32_t)PCI_MSIX_FLAGS_ENABLE << 16);
	table_wr(t, 1, 0, 0xfee00000);
	table_wr(t, 1, 2, 0x4051);
	table_wr(t, 1, 3, 0);
	gsi = d2.msix.gsi[1];
	ck_assert_int_eq(irqfds[gsi], d2.msix.efd[1]);
	cfg_wr(2 << 3, exp + PCI_EXP_DEVCTL, 0x2810); /* payload sizes: the host's to set */
	ck_assert_uint_eq(cfg_rd(2 << 3, exp + PCI_EXP_DEVCTL) & 0xffff, 0x2810);
	table_wr(t, 1, 3, 1);
	ck_assert_int_eq(write(d2.msix.efd[1], &one, sizeof(one)), 8); /* a late completion */
	mmio_hits = 0;
	bus_access(&mmio, bar64(2 << 3, 0), &v, 4, false);
	ck_assert_uint_eq(mmio_hits, 1);
	/* Initiate FLR */
	cfg_wr(2 << 3, exp + PCI_EXP_DEVCTL, 0x2810 | PCI_EXP_DEVCTL_BCR_FLR);
	ck_assert_uint_eq(flr_calls, 1);
	ck_assert_uint_eq(flr_cmd_seen, 0);
	ck_assert_uint_eq(d2.flrs, 1);
	ck_assert_uint_eq(cfg_rd(2 << 3, exp + PCI_EXP_DEVCTL) & 0xffff, 0);
	ck_assert_uint_eq(cfg_rd(2 << 3, PCI_COMMAND) & 0xffff, 0);
	ck_assert_uint_eq(cfg_rd(2 << 3, 0x10), PCI_BAR_MEM_TYPE_64);
	ck_assert_uint_eq(cfg_rd(2 << 3, 0x14), 0);
	ck_assert_uint_eq(cfg_rd(2 << 3, cap) >> 16, 1); /* table size 2, enable and mask off */
	ck_assert_int_eq(irqfds[gsi], -1);
	ck_assert(routes[gsi].masked);
	ck_assert(!d2.bar[0].mapped && !d2.bar[4].mapped);
	ck_assert_uint_eq(efd_count(d2.msix.efd[1]), 0); /* the old function's signal is gone */
	ck_assert_uint_eq(d2.msix.table[1].ctrl, PCI_MSIX_ENTRY_CTRL_MASKBIT);
	ck_assert_uint_eq(d2.msix.table[1].addr_lo | d2.msix.table[1].data, 0);
	/* what the host restores works again: BARs, command, MSI-X, an unmasked vector */
	cfg_wr(2 << 3, 0x20, (uint32_t)(t & 0xffffffff));
	cfg_wr(2 << 3, 0x24, (uint32_t)(t >> 32));
	cfg_wr(2 << 3, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	ck_assert(d2.bar[4].mapped);
	cfg_wr(2 << 3, cap, cfg_rd(2 << 3, cap) | (uint32_t)PCI_MSIX_FLAGS_ENABLE << 16);
	bus_access(&mmio, t + 0x1000, &pba, 4, false);
	ck_assert_uint_eq(pba, 0);
	table_wr(t, 1, 0, 0xfee00000);
	table_wr(t, 1, 2, 0x4051);
	table_wr(t, 1, 3, 0);
	ck_assert_int_eq(irqfds[gsi], d2.msix.efd[1]);
	ck_assert_uint_eq(efd_count(d2.msix.efd[1]), 0); /* nothing spurious on unmask */
	pci_dev_exit(&d2);
}
END_TEST

START_TEST(test_prefetchable_bar_window)
{
	struct pci_dev d2;
	char err[128];
	uint64_t a;

	pci_dev_init(&d2, "cmb", 0x1b36, 0x0111, 0x058000, 0x1b36, 0x0111);
	ck_assert_int_eq(pci_dev_add_bar(&d2, 2, 1 << 20, true, true, &bar_ops, NULL, NULL), 0);
	ck_assert_int_eq(pci_bus_add(&pb, &d2, err, sizeof(err)), 0);
	ck_assert_uint_eq(d2.devfn, 2 << 3);
	a = bar64(2 << 3, 2);
	ck_assert_uint_ge(a, LAYOUT_MMIO64_START);
	ck_assert_uint_eq(a & ((1 << 20) - 1), 0);
	ck_assert_uint_eq(cfg_rd(2 << 3, 0x18) & 0xf, PCI_BAR_MEM_TYPE_64 | PCI_BAR_MEM_PREFETCH);
	pci_dev_exit(&d2);
	ck_assert_uint_eq(cfg_rd(2 << 3, 0), 0xffffffff);
}
END_TEST

static int host_maps, host_maps_max, host_map_calls;
static uint64_t host_map_gpa;

static int fake_map_host(void *o, uint64_t gpa, uint64_t size, void *host)
{
	host_maps++;
	host_map_calls++;
	if (host_maps > host_maps_max)
		host_maps_max = host_maps;
	host_map_gpa = gpa;
	return 0;
}

static int fake_unmap_host(void *o, uint64_t gpa)
{
	ck_assert_uint_eq(gpa, host_map_gpa);
	host_maps--;
	return 0;
}

static unsigned threads_now(void)
{
	char line[256];
	unsigned n = 0;
	FILE *f = fopen("/proc/self/status", "r");

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %u", &n) == 1)
			break;
	fclose(f);
	return n;
}

/* One vCPU flipping a host-memory BAR (the CMB) through ECAM: no thread per write, one mapping
 * at a time, and the BAR ends up exactly where config space says. */
START_TEST(test_ecam_bar_flood_one_mapping)
{
	static uint8_t cmb[1 << 16] __attribute__((aligned(4096)));
	uint64_t ecam = LAYOUT_ECAM_START + (2 << 15), a0, a1, cur;
	unsigned i, max_threads = 0, threads0 = threads_now();
	struct pci_dev d2;
	char err[128];
	uint32_t v;

	pb.ops.map_host = fake_map_host;
	pb.ops.unmap_host = fake_unmap_host;
	host_maps = host_maps_max = host_map_calls = 0;
	pci_dev_init(&d2, "cmb", 0x1b36, 0x0111, 0x058000, 0x1b36, 0x0111);
	ck_assert_int_eq(pci_dev_add_bar(&d2, 2, sizeof(cmb), true, true, NULL, NULL, cmb), 0);
	ck_assert_int_eq(pci_bus_add(&pb, &d2, err, sizeof(err)), 0);
	a0 = bar64(2 << 3, 2);
	a1 = a0 + 0x100000;
	ck_assert_int_eq(host_maps, 1);
	for (i = 0; i < 100000; i++) {
		cur = (i & 1) ? a0 : a1;
		v = (uint32_t)cur;
		bus_access(&mmio, ecam + 0x18, &v, 4, true);
		/* and the memory-enable bit, as a guest toggling decode does */
		v = (i & 2) ? 0 : PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER;
		bus_access(&mmio, ecam + 4, &v, 4, true);
		if (i % 4096 == 0 && threads_now() > max_threads)
			max_threads = threads_now();
	}
	v = PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER;
	bus_access(&mmio, ecam + 4, &v, 4, true);
	pci_bus_remap_flush(&pb);
	/* The worker was started with the bus: no thread appeared while flooding. */
	ck_assert_uint_le(max_threads, threads0);
	ck_assert_int_eq(host_maps, 1);
	ck_assert_int_eq(host_maps_max, 1);
	ck_assert_uint_eq(host_map_gpa, bar64(2 << 3, 2));
	ck_assert_uint_eq(host_map_gpa, a0);
	/* Coalesced: far fewer remaps than writes. */
	ck_assert_int_lt(host_map_calls, 100000);
	pci_dev_exit(&d2);
	ck_assert_int_eq(host_maps, 0);
}
END_TEST

/* A BAR moved onto another BAR, into RAM, the IOAPIC or ECAM stops decoding instead. */
START_TEST(test_bar_overlap_refused)
{
	uint64_t a = bar64(1 << 3, 0), t = bar64(1 << 3, 4),
		 bad[] = {t, 0x100000, LAYOUT_IOAPIC, LAYOUT_ECAM_START, LAYOUT_RAM_HIGH};
	unsigned i;
	uint32_t v;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cfg_wr(1 << 3, 0x10, (uint32_t)bad[i]);
		cfg_wr(1 << 3, 0x14, (uint32_t)(bad[i] >> 32));
		ck_assert(!bus_access(&mmio, a, &v, 4, false));
		/* the MSI-X table and ECAM still answer as before */
		bus_access(&mmio, t + 12, &v, 4, false);
		ck_assert_uint_eq(v, 1);
		ck_assert(bus_access(&mmio, LAYOUT_ECAM_START + (1 << 15), &v, 4, false));
		ck_assert_uint_eq(v, 0x01101b36);
	}
	ck_assert_uint_ge(pb.remap_refused, 5);
	/* Back to a free place: decodes again. */
	cfg_wr(1 << 3, 0x10, (uint32_t)a);
	cfg_wr(1 << 3, 0x14, (uint32_t)(a >> 32));
	ck_assert(bus_access(&mmio, a + 0x10, &v, 4, false));
	ck_assert_uint_eq(v, 0xab000010);
}
END_TEST

/* With bus mastering off no MSI-X message leaves the device: it pends until mastering is on. */
START_TEST(test_msix_needs_bus_master)
{
	uint64_t t = bar64(1 << 3, 4);
	unsigned cap = 0x40;

	table_wr(t, 0, 0, 0xfee00000);
	table_wr(t, 0, 2, 0x41);
	table_wr(t, 0, 3, 0);
	cfg_wr(1 << 3, cap, cfg_rd(1 << 3, cap) | (uint32_t)PCI_MSIX_FLAGS_ENABLE << 16);
	ck_assert(pci_dev_bus_master(&dev));
	pci_msix_notify(&dev, 0);
	ck_assert_uint_eq(efd_count(dev.msix.efd[0]), 1);
	cfg_wr(1 << 3, 4, PCI_COMMAND_MEMORY);
	ck_assert(!pci_dev_bus_master(&dev));
	pci_msix_notify(&dev, 0);
	ck_assert_uint_eq(efd_count(dev.msix.efd[0]), 0);
	cfg_wr(1 << 3, 4, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	ck_assert_uint_eq(efd_count(dev.msix.efd[0]), 1);
}
END_TEST

static Suite *pci_suite(void)
{
	Suite *s = suite_create("pci");
	TCase *t = tcase_create("platform");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_host_bridge_and_absent);
	tcase_add_test(t, test_ecam);
	tcase_add_test(t, test_bar_probe_and_move);
	tcase_add_test(t, test_capabilities);
	tcase_add_test(t, test_msix_routes_and_masking);
	tcase_add_test(t, test_msix_masked_backend_signal);
	tcase_add_test(t, test_flr);
	tcase_add_test(t, test_prefetchable_bar_window);
	tcase_add_test(t, test_ecam_bar_flood_one_mapping);
	tcase_add_test(t, test_bar_overlap_refused);
	tcase_add_test(t, test_msix_needs_bus_master);
	tcase_set_timeout(t, 60);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return testutil_run_suite(pci_suite());
}
