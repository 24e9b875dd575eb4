/* libFuzzer target for PCI config space as a guest reaches it: CF8/CFC ports and ECAM, BAR
 * programming (sizing, moving, decode on and off) with host-memory and MMIO BARs, MSI-X table
 * and PBA accesses through the moved BAR, vector raises. Every byte is guest input. The bus runs
 * with remap_inline: queued remaps are applied here at flush points, not by a worker thread. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bus.h"
#include "layout.h"
#include "pci.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int next_gsi;
static uint8_t host_bar[0x2000];

static int fake_alloc_gsi(void *o)
{
	(void)o;
	return next_gsi < 1000 ? next_gsi++ : -1;
}

static int fake_map(void *o, uint64_t gpa, uint64_t size, void *host)
{
	(void)o;
	(void)gpa;
	(void)size;
	(void)host;
	return 0;
}

static int fake_unmap(void *o, uint64_t gpa)
{
	(void)o;
	(void)gpa;
	return 0;
}

static void bar_read(void *o, uint64_t off, void *d, unsigned len)
{
	(void)o;
	(void)off;
	memset(d, 0x5a, len);
}

static void bar_write(void *o, uint64_t off, const void *d, unsigned len)
{
	(void)o;
	(void)off;
	(void)d;
	(void)len;
}

static const struct bus_ops bar_ops = {.read = bar_read, .write = bar_write};

struct fz {
	const uint8_t *p;
	size_t n;
};

static uint64_t take(struct fz *f, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++) {
		v <<= 8;
		if (f->n) {
			v |= *f->p++;
			f->n--;
		}
	}
	return v;
}

static unsigned take_len(struct fz *f)
{
	static const unsigned lens[] = {1, 2, 4, 8};

	return lens[take(f, 1) & 3];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pci_platform_ops ops = {.alloc_gsi = fake_alloc_gsi,
				       .set_msi_route = fz_route_ok,
				       .irqfd = fz_irqfd_ok,
				       .map_host = fake_map,
				       .unmap_host = fake_unmap,
				       .remap_inline = true};
	uint8_t vcap[8] = {PCI_CAP_ID_VNDR, 0, 8, 1, 'L', 'I', 'O', 'V'};
	static struct bus pio, mmio;
	static struct pci_bus pb;
	static struct pci_dev dev, dev2;
	struct fz f = {data, size};
	char err[128];
	uint8_t buf[8];
	unsigned steps = 0;

	bus_init(&pio);
	bus_init(&mmio);
	next_gsi = 24;
	if (pci_bus_init(&pb, &ops, &pio, &mmio, err, sizeof(err)))
		abort();
	pci_dev_init(&dev, "nvme0", 0x1b36, 0x0110, 0x010802, 0x1b36, 0x0110);
	pci_dev_init(&dev2, "cmb", 0x1b36, 0x0111, 0x058000, 0x1b36, 0x0111);
	if (pci_dev_add_bar(&dev, 0, 0x4000, true, false, &bar_ops, NULL, NULL) ||
	    pci_dev_add_msix(&dev, 8, 4, err, sizeof(err)) ||
	    pci_dev_add_cap(&dev, vcap, sizeof(vcap)) < 0 ||
	    pci_dev_add_bar(&dev2, 2, sizeof(host_bar), true, true, NULL, NULL, host_bar) ||
	    pci_dev_add_bar(&dev2, 0, 0x1000, false, false, &bar_ops, NULL, NULL) ||
	    pci_bus_add(&pb, &dev, err, sizeof(err)) || pci_bus_add(&pb, &dev2, err, sizeof(err))) {
		fprintf(stderr, "fuzz_pci: set-up: %s\n", err);
		abort();
	}

	while (f.n && steps++ < 512) {
		uint8_t op = (uint8_t)take(&f, 1);
		bool wr = op & 0x80;
		unsigned len = take_len(&f);
		uint64_t v = take(&f, 8), addr;
		struct pci_dev *d = (op & 0x40) ? &dev2 : &dev;
		unsigned b;

		memcpy(buf, &v, sizeof(buf));
		switch (op & 7) {
		case 0: /* CF8: bus, device, function, register */
			bus_access(&pio, LAYOUT_PCI_CONF_ADDR, buf, 4, true);
			break;
		case 1: /* CFC data window, any width at any of its four bytes */
			addr = LAYOUT_PCI_CONF_DATA + (take(&f, 1) & 3);
			bus_access(&pio, addr, buf, len > 4 ? 4 : len, wr);
			break;
		case 2: /* ECAM: the device's 4 KiB, mostly, or anywhere in the window */
			addr = take(&f, 2) & 0xfff;
			if (op & 0x20)
				addr |= (take(&f, 3) & 0xfffff000) % LAYOUT_ECAM_SIZE;
			else
				addr |= (uint64_t)d->devfn << 12;
			bus_access(&mmio, LAYOUT_ECAM_START + addr, buf, len, wr);
			break;
		case 3: /* a BAR where it decodes now (MSI-X table and PBA live in BAR 4) */
			pci_bus_remap_flush(&pb);
			b = (unsigned)take(&f, 1) % PCI_NUM_BARS;
			if (d->bar[b].mapped && !d->bar[b].mapped_host)
				bus_access(&mmio, d->bar[b].mapped_addr + (take(&f, 2) & 0x3fff),
					   buf, len, wr);
			break;
		case 4:
			pci_msix_notify(&dev, (unsigned)take(&f, 1) % 10);
			break;
		case 5: /* direct config access as the handlers make it */
			if (wr)
				pci_cfg_write(&pb, 0, d->devfn, (unsigned)take(&f, 2) & 0xfff, buf,
					      len);
			else
				pci_cfg_read(&pb, 0, d->devfn, (unsigned)take(&f, 2) & 0xfff, buf,
					     len);
			break;
		case 6:
			pci_dev_bus_master(d);
			break;
		default:
			pci_bus_remap_flush(&pb);
			break;
		}
		/* what the remap worker would do next: apply what this step queued */
		if (op & 0x08)
			pci_bus_remap_flush(&pb);
	}
	pci_bus_remap_flush(&pb);
	pci_dev_exit(&dev2);
	pci_dev_exit(&dev);
	pci_bus_exit(&pb);
	return 0;
}
