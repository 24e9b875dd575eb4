/* libFuzzer target for the passthrough device model (devices/vfio) over the fake VFIO function
 * of tests/lib/vfio_fake.h: the first bytes may corrupt the device's own config space (a hostile
 * or broken device at creation, its extended capability headers and ROM size too), the rest are
 * guest accesses: config reads and writes over the 4 KiB (BAR and ROM BAR sizing, the command
 * register, MSI-X control, passthrough registers, extended capabilities), BAR and ROM accesses
 * where they decode, MSI-X table writes, vector signals, INTx asserted and the guest's EOIs (INTx
 * through lvmm's IOAPIC or KVM's). Checked besides memory safety: the guest never writes a config
 * byte lvmm emulates through to the device, a BAR piece is never mapped twice or unmapped
 * unmapped, nothing stays mapped once the function is gone, VFIO never has INTx on with MSI or
 * MSI-X, and the pin is high only while INTx is enabled, on and asserted. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bus.h"
#include "fuzz_util.h"
#include "layout.h"
#include "pci.h"
#include "vfio_fake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MAPS 64

static struct {
	uint64_t gpa;
	bool used;
} maps[MAX_MAPS];
static int next_gsi;

static int fz_alloc_gsi(void *o)
{
	(void)o;
	return next_gsi < 2000 ? next_gsi++ : -1;
}

static int fz_map(void *o, uint64_t gpa, uint64_t size, void *host)
{
	(void)o;
	(void)size;
	(void)host;
	for (unsigned i = 0; i < MAX_MAPS; i++)
		if (maps[i].used && maps[i].gpa == gpa)
			abort(); /* mapped twice */
	for (unsigned i = 0; i < MAX_MAPS; i++)
		if (!maps[i].used) {
			maps[i].used = true;
			maps[i].gpa = gpa;
			return 0;
		}
	return -28; /* ENOSPC */
}

static int fz_unmap(void *o, uint64_t gpa)
{
	(void)o;
	for (unsigned i = 0; i < MAX_MAPS; i++)
		if (maps[i].used && maps[i].gpa == gpa) {
			maps[i].used = false;
			return 0;
		}
	abort(); /* not mapped */
}

static bool fz_line[24];
static bool fz_kvm;

static int fz_intx_line(void *o, unsigned gsi, bool level)
{
	(void)o;
	if (gsi >= 24 || fz_line[gsi] == level)
		abort(); /* the bus set an input to the level it had */
	fz_line[gsi] = level;
	return 0;
}

static int fz_intx_irqfd(void *o, unsigned gsi, int efd, int resample, bool assign)
{
	(void)o, (void)gsi, (void)efd, (void)resample, (void)assign;
	return fz_kvm ? 0 : -95; /* EOPNOTSUPP: lvmm's IOAPIC */
}

/* VFIO takes one interrupt type at a time; the pin is high only when it may be. */
static bool intx_broken(const struct fake_vfio *f, struct vfio_pci *v)
{
	uint16_t cmd;
	bool high;

	memcpy(&cmd, v->pci.cfg + PCI_COMMAND, 2);
	high = v->pci.intx_gsi && fz_line[v->pci.intx_gsi];
	return (f->intx_fd >= 0) != v->intx_on || (v->intx_on && (v->msix_on || v->msi_on)) ||
	       (high && (!v->intx_on || (cmd & PCI_COMMAND_INTX_DISABLE) || !v->pci.intx_asserted));
}

/* Bytes lvmm emulates never reach the device; the command register is synced on purpose. */
static bool guest_reached_emulated(const struct fake_vfio *f, const struct vfio_pci *v)
{
	for (unsigned i = 0; i < f->cfg_writes && i < FAKE_MAX_LOG; i++)
		for (unsigned b = 0; b < f->cfg_log[i].len; b++) {
			unsigned off = f->cfg_log[i].off + b;

			if (off >= PCI_CFG_EXT_SIZE ||
			    (v->emu[off] && off != PCI_COMMAND && off != PCI_COMMAND + 1))
				return true;
		}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pci_platform_ops ops = {.alloc_gsi = fz_alloc_gsi,
				       .set_msi_route = fz_route_ok,
				       .irqfd = fz_irqfd_ok,
				       .intx_line = fz_intx_line,
				       .intx_irqfd = fz_intx_irqfd,
				       .map_host = fz_map,
				       .unmap_host = fz_unmap,
				       .remap_inline = true};
	const struct dev_host host = {.map_host = fz_map, .unmap_host = fz_unmap};
	static struct bus pio, mmio;
	static struct pci_bus pb;
	static struct fake_vfio fake;
	static struct vfio_pci vp;
	struct fz_in f = {data, size};
	unsigned steps = 0, pokes;
	char err[200];
	uint8_t buf[8];

	memset(maps, 0, sizeof(maps));
	memset(fz_line, 0, sizeof(fz_line));
	next_gsi = 24;
	bus_init(&pio);
	bus_init(&mmio);
	if (pci_bus_init(&pb, &ops, &pio, &mmio, err, sizeof(err)))
		abort();
	fake_vfio_init(&fake);
	/* A hostile device: up to 3 config bytes changed, an mmap refused, a region resized. */
	pokes = (unsigned)fz_take(&f, 1);
	for (unsigned i = 0; i < (pokes & 3); i++) {
		unsigned off = (unsigned)fz_take(&f, 1);

		fake.cfg[off] = (uint8_t)fz_take(&f, 1);
	}
	if (pokes & 4)
		fake.fail_mmap = 1;
	if (pokes & 8)
		fake.info.regions[fz_take(&f, 1) % 6].size = 1ULL << (fz_take(&f, 1) % 42);
	if (pokes & 0x10) { /* an extended capability header */
		uint32_t hdr = (uint32_t)fz_take(&f, 4);

		memcpy(fake.cfg + PCI_CFG_SIZE + 4 * (fz_take(&f, 1) % 0x40), &hdr, 4);
	}
	if (pokes & 0x20)
		fake.info.regions[VFIO_PCI_ROM_REGION].size = fz_take(&f, 4) & 0x3ffffff;
	fz_kvm = pokes & 0x40;
	if (vfio_pci_init(&vp, "fz0", &fake.info, &fake_vfio_ops, &fake, &host, err, sizeof(err))) {
		pci_bus_exit(&pb);
		return 0;
	}
	if (pci_bus_add(&pb, &vp.pci, err, sizeof(err))) {
		vfio_pci_exit(&vp);
		pci_bus_exit(&pb);
		return 0;
	}
	if (vfio_pci_intx_start(&vp, err, sizeof(err)))
		abort(); /* the fake takes every INTx request */
	vfio_pci_cfg_sync_command(&vp);
	fake.cfg_writes = 0;

	while (f.n && steps++ < 512) {
		uint8_t op = (uint8_t)fz_take(&f, 1);
		static const unsigned lens[] = {1, 2, 4, 8};
		unsigned len = lens[(op >> 3) & 3], b;
		uint64_t v = fz_take(&f, 8), off;
		struct pci_msix *m = &vp.pci.msix;

		memcpy(buf, &v, sizeof(buf));
		switch (op & 7) {
		case 0: /* config write anywhere, any width */
			pci_cfg_write(&pb, 0, vp.pci.devfn, (unsigned)fz_take(&f, 2) & 0xfff, buf,
				      len > 4 ? 4 : len);
			break;
		case 1: /* config read */
			pci_cfg_read(&pb, 0, vp.pci.devfn, (unsigned)fz_take(&f, 2) & 0xfff, buf,
				     len > 4 ? 4 : len);
			break;
		case 2: { /* BAR or ROM BAR sizing, then a value back (maybe a new place) */
			unsigned reg;

			b = (unsigned)fz_take(&f, 1) % PCI_BAR_SLOTS;
			reg = b == PCI_ROM_BAR ? PCI_ROM_ADDRESS : PCI_BAR0 + 4 * b;
			memset(buf, 0xff, 4);
			pci_cfg_write(&pb, 0, vp.pci.devfn, reg, buf, 4);
			pci_cfg_read(&pb, 0, vp.pci.devfn, reg, buf, 4);
			memcpy(buf, &v, 4);
			pci_cfg_write(&pb, 0, vp.pci.devfn, reg, buf, 4);
			break;
		}
		case 3: /* a BAR or ROM access where it decodes, trapped or not */
			b = (unsigned)fz_take(&f, 1) % PCI_BAR_SLOTS;
			off = fz_take(&f, 4);
			if (vp.pci.bar[b].mapped && vp.pci.bar[b].size)
				bus_access(&mmio,
					   vp.pci.bar[b].mapped_addr + off % vp.pci.bar[b].size,
					   buf, len, op & 0x80);
			break;
		case 4: /* an MSI-X table or PBA access at any offset near them */
			off = fz_take(&f, 2);
			if (m->nvec)
				pci_msix_access(&vp.pci, (op & 0x40) ? m->pba_bar : m->bar,
						((op & 0x40) ? m->pba_off : m->table_off) +
						    off % (m->nvec * 16 + 16),
						buf, len, op & 0x80);
			break;
		case 5: /* the command register */
			pci_cfg_write(&pb, 0, vp.pci.devfn, PCI_COMMAND, buf, 2);
			break;
		case 6: /* MSI-X control */
			if (m->cap)
				pci_cfg_write(&pb, 0, vp.pci.devfn, m->cap + PCI_MSIX_FLAGS, buf,
					      2);
			break;
		default:
			if (!(op & 0x40)) { /* the device signals a vector */
				if (m->nvec)
					pci_msix_notify(&vp.pci, (unsigned)(v % (m->nvec + 1)));
			} else if (op & 0x80) {
				/* INTx fires: what the reader thread does with a trigger */
				pthread_mutex_lock(&vp.pci.lock);
				if (vp.intx_on)
					pci_intx_set_locked(&vp.pci, true);
				pthread_mutex_unlock(&vp.pci.lock);
			} else { /* the guest's EOI of some pin */
				pci_bus_intx_eoi(&pb, (unsigned)(v % 24));
			}
			break;
		}
		if (guest_reached_emulated(&fake, &vp) || intx_broken(&fake, &vp))
			abort();
		fake.cfg_writes = 0;
	}
	vfio_pci_exit(&vp);
	pci_bus_exit(&pb);
	for (unsigned i = 0; i < MAX_MAPS; i++)
		if (maps[i].used)
			abort(); /* a BAR piece outlived its function */
	return 0;
}
