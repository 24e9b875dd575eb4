/* PCI BARs (pci.h): firmware-style placement in the host bridge's windows, with the space of
 * removed functions taken again, and decoding where the guest programs them (MMIO handlers or
 * host memory), checked against the windows and every other BAR; ECAM writes that move a BAR
 * are applied by the bus's remap worker. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "layout.h"
#include "pci_internal.h"
#include "seccomp_filter.h"

static uint64_t bar_addr(const struct pci_dev *d, unsigned i)
{
	uint64_t a = get32(d->cfg + pci_bar_reg(i)) & (i == PCI_ROM_BAR ? ~0x7ffULL : ~0xfULL);

	if (d->bar[i].is64)
		a |= (uint64_t)get32(d->cfg + PCI_BAR0 + 4 * (i + 1)) << 32;
	return a;
}

static bool remap_log_due(struct pci_bus *b)
{
	return pci_log_due(&b->remap_refused);
}

/* Whether [addr, addr + size) may decode: inside one of the host bridge's windows (so never on
 * RAM, ECAM, the IOAPIC or the LAPIC, which lie outside them) and clear of every other BAR that
 * decodes now. Real hardware leaves an overlap undefined; lvmm does not decode the newcomer.
 * Called with b->remap_lock held, which keeps every bar->mapped stable. */
static const char *bar_place_check(struct pci_bus *b, const struct pci_dev *self, unsigned self_bar,
				   uint64_t addr, uint64_t size)
{
	const struct {
		uint64_t start, size;
	} win[] = {{LAYOUT_MMIO32_START, LAYOUT_MMIO32_SIZE},
		   {LAYOUT_MMIO64_START, b->mmio64_size}};
	bool inside = false;
	unsigned w, s, i;

	for (w = 0; w < sizeof(win) / sizeof(win[0]); w++)
		if (addr >= win[w].start && addr - win[w].start <= win[w].size &&
		    size <= win[w].size - (addr - win[w].start))
			inside = true;
	if (!inside)
		return "outside the PCI windows";
	for (s = 0; s < PCI_MAX_DEVS; s++) {
		const struct pci_dev *o = b->dev[s];

		for (i = 0; o && i < PCI_BAR_SLOTS; i++) {
			const struct pci_bar *ob = &o->bar[i];

			if ((o == self && i == self_bar) || !ob->mapped)
				continue;
			if (addr < ob->mapped_addr + ob->size && ob->mapped_addr < addr + size)
				return "overlapping another BAR";
		}
	}
	return NULL;
}

/* Makes each BAR decode where config space says (or nowhere); runs without d->lock because bus
 * registration takes the bus lock, which MMIO handlers of this device run under, and with
 * b->remap_lock, so two paths never map one BAR twice. */
void bars_update(struct pci_dev *d)
{
	struct pci_bus *b = d->bus;
	unsigned i;

	pthread_mutex_lock(&b->remap_lock);
	b->remaps++;

	for (i = 0; i < PCI_BAR_SLOTS; i++) {
		struct pci_bar *bar = &d->bar[i];
		bool want, use_host;
		uint64_t addr;
		int r = 0;

		if (!bar->size)
			continue;
		pthread_mutex_lock(&d->lock);
		addr = bar_addr(d, i);
		want = (get16(d->cfg + PCI_COMMAND) & PCI_COMMAND_MEMORY) && addr;
		if (i == PCI_ROM_BAR)
			want = want && (d->cfg[PCI_ROM_ADDRESS] & PCI_ROM_ADDRESS_ENABLE);
		pthread_mutex_unlock(&d->lock);
		use_host = bar->host && b->ops.map_host;
		if (bar->mapped && bar->mapped_addr == addr && want && !bar->parked)
			continue;
		bar->parked = false;
		if (bar->mapped) {
			if (bar->mapped_host)
				b->ops.unmap_host(b->ops.opaque, bar->mapped_addr);
			else
				bus_unregister(b->mmio, bar->mapped_addr, bar->opaque);
			bar->mapped = false;
			if (bar->moved)
				bar->moved(d, i, ~0ULL);
		}
		if (want) {
			const char *why = bar_place_check(b, d, i, addr, bar->size);

			if (why) {
				if (remap_log_due(b))
					fprintf(
					    stderr,
					    "pci %s: BAR%u at 0x%llx (%llu bytes) %s: not decoded "
					    "(refusal %llu)\n",
					    d->name, i, (unsigned long long)addr,
					    (unsigned long long)bar->size, why,
					    (unsigned long long)b->remap_refused);
				continue;
			}
			r = -ENODEV;
			if (use_host)
				r = b->ops.map_host(b->ops.opaque, addr, bar->size, bar->host);
			/* Without a host mapping the BAR still works, by MMIO exits. */
			bar->mapped_host = !r;
			if (r && bar->ops)
				r = bus_register(b->mmio, addr, bar->size, bar->ops, bar->opaque,
						 d->name);
			if (r) {
				if (remap_log_due(b))
					fprintf(stderr,
						"pci %s: BAR%u at 0x%llx not mapped: %s (refusal "
						"%llu)\n",
						d->name, i, (unsigned long long)addr, strerror(-r),
						(unsigned long long)b->remap_refused);
				continue;
			}
			bar->mapped = true;
			bar->mapped_addr = addr;
			if (bar->moved)
				bar->moved(d, i, addr);
		}
	}
	pthread_mutex_unlock(&b->remap_lock);
}

void bars_park(struct pci_dev *d)
{
	struct pci_bus *b = d->bus;

	pthread_mutex_lock(&b->remap_lock);
	for (unsigned i = 0; i < PCI_NUM_BARS; i++) {
		struct pci_bar *bar = &d->bar[i];

		if (!bar->mapped || bar->parked)
			continue;
		/* no bus_unregister here: an ECAM write holds the MMIO bus's lock */
		if (bar->mapped_host) {
			b->ops.unmap_host(b->ops.opaque, bar->mapped_addr);
			bar->mapped = false;
		} else {
			bar->parked = true;
		}
		if (bar->moved)
			bar->moved(d, i, ~0ULL);
	}
	pthread_mutex_unlock(&b->remap_lock);
}

/* The bus's remap worker: applies the remaps ECAM writes queued, one device at a time. */
void *pci_remap_thread(void *opaque)
{
	struct pci_bus *b = opaque;
	char err[160];

	/* The guest decides when this thread maps memory slots: device-I/O calls only. */
	if (seccomp_thread_install(SECCOMP_IO, err, sizeof(err)))
		fprintf(stderr, "lvmm: pci: BAR remap thread: %s\n", err);
	pthread_mutex_lock(&b->lock);
	for (;;) {
		struct pci_dev *d;
		unsigned slot;

		while (!b->remap_want && !b->remap_stop)
			pthread_cond_wait(&b->remap_cond, &b->lock);
		if (b->remap_stop)
			break;
		slot = (unsigned)__builtin_ctz(b->remap_want);
		b->remap_want &= ~(1u << slot);
		d = b->dev[slot];
		if (!d)
			continue;
		b->remap_dev = d;
		pthread_mutex_unlock(&b->lock);
		bars_update(d);
		pthread_mutex_lock(&b->lock);
		b->remap_dev = NULL;
		pthread_cond_broadcast(&b->remap_cond);
	}
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

void pci_bus_remap_flush(struct pci_bus *b)
{
	pthread_mutex_lock(&b->lock);
	while (b->ops.remap_inline && b->remap_want) {
		struct pci_dev *d = b->dev[__builtin_ctz(b->remap_want)];

		b->remap_want &= b->remap_want - 1;
		pthread_mutex_unlock(&b->lock);
		if (d)
			bars_update(d);
		pthread_mutex_lock(&b->lock);
	}
	while (b->remap_started && (b->remap_want || b->remap_dev))
		pthread_cond_wait(&b->remap_cond, &b->lock);
	pthread_mutex_unlock(&b->lock);
}

/* ---- placement ---- */

/* A freed range of exactly size in the window starting at start: naturally aligned already,
 * as it was placed so. 0 when none. */
static uint64_t bar_space_take(struct pci_bus *b, uint64_t size, uint64_t start)
{
	uint64_t wsize = start == LAYOUT_MMIO64_START ? b->mmio64_size : LAYOUT_MMIO32_SIZE;
	unsigned i;

	for (i = 0; i < b->nbar_free; i++) {
		uint64_t a = b->bar_free[i].addr;

		if (b->bar_free[i].size == size && a >= start && a - start < wsize) {
			b->bar_free[i] = b->bar_free[--b->nbar_free];
			return a;
		}
	}
	return 0;
}

/* Gives a removed function's BAR range back: the top of a window lowers its bump pointer,
 * anything else waits in bar_free for a BAR of the same size. */
static void bar_space_put(struct pci_bus *b, const struct pci_bar *bar)
{
	uint64_t *next = bar->prefetch ? &b->mmio64_next : &b->mmio32_next;

	if (bar->placed + bar->size == *next)
		*next = bar->placed;
	else if (b->nbar_free < sizeof(b->bar_free) / sizeof(b->bar_free[0]))
		b->bar_free[b->nbar_free++] = (typeof(b->bar_free[0])){bar->placed, bar->size};
	else
		fprintf(stderr,
			"lvmm: pci: BAR space at 0x%llx (%llu bytes) not reused: free list full\n",
			(unsigned long long)bar->placed, (unsigned long long)bar->size);
}

/* The 64-bit window grown to hold need bytes: the next power of two, within its limit. */
static void mmio64_grow(struct pci_bus *b, uint64_t need)
{
	uint64_t size = b->mmio64_size;

	while (size < need && size <= b->mmio64_max / 2)
		size <<= 1;
	if (size < need && need <= b->mmio64_max)
		size = b->mmio64_max;
	b->mmio64_size = size;
}

void pci_bus_mmio64_limit(struct pci_bus *b, uint64_t max)
{
	if (max > b->mmio64_size)
		b->mmio64_max = max;
}

uint64_t pci_bus_mmio64_seal(struct pci_bus *b)
{
	b->mmio64_max = b->mmio64_size;
	return b->mmio64_size;
}

/* Firmware-style placement, largest BARs first, naturally aligned: prefetchable BARs in the
 * 64-bit window, the others in the 32-bit hole (ACPI declares the 64-bit window
 * prefetchable, so Linux would not claim a non-prefetchable BAR there). */
int bars_place(struct pci_bus *b, struct pci_dev *d, char *err, unsigned errlen)
{
	unsigned i;

	for (;;) {
		struct pci_bar *best = NULL;
		uint64_t a, *next, end;
		unsigned bi = 0;

		for (i = 0; i < PCI_BAR_SLOTS; i++)
			if (d->bar[i].size && !bar_addr(d, i) &&
			    (!best || d->bar[i].size > best->size)) {
				best = &d->bar[i];
				bi = i;
			}
		if (!best)
			break;
		next = best->prefetch ? &b->mmio64_next : &b->mmio32_next;
		a = bar_space_take(b, best->size,
				   best->prefetch ? LAYOUT_MMIO64_START : LAYOUT_MMIO32_START);
		if (a) {
			best->placed = a;
			put32(d->cfg + pci_bar_reg(bi),
			      get32(d->cfg + pci_bar_reg(bi)) | (uint32_t)a);
			if (best->is64)
				put32(d->cfg + PCI_BAR0 + 4 * (bi + 1), (uint32_t)(a >> 32));
			continue;
		}
		a = (*next + best->size - 1) & ~(best->size - 1);
		if (best->prefetch)
			mmio64_grow(b, a + best->size - LAYOUT_MMIO64_START);
		end = best->prefetch ? LAYOUT_MMIO64_START + b->mmio64_size
				     : LAYOUT_MMIO32_START + LAYOUT_MMIO32_SIZE;
		if (a + best->size > end) {
			snprintf(err, errlen, "pci %s: BAR%u (%llu bytes) does not fit the window",
				 d->name, bi, (unsigned long long)best->size);
			return -ENOSPC;
		}
		*next = a + best->size;
		best->placed = a;
		put32(d->cfg + pci_bar_reg(bi), get32(d->cfg + pci_bar_reg(bi)) | (uint32_t)a);
		if (best->is64)
			put32(d->cfg + PCI_BAR0 + 4 * (bi + 1), (uint32_t)(a >> 32));
	}
	return 0;
}

/* Largest first, as placed: a window's top comes back before what lies below it. */
void bars_release(struct pci_bus *b, struct pci_dev *d)
{
	unsigned v;

	for (;;) {
		struct pci_bar *big = NULL;

		for (v = 0; v < PCI_BAR_SLOTS; v++)
			if (d->bar[v].placed && (!big || d->bar[v].placed > big->placed))
				big = &d->bar[v];
		if (!big)
			break;
		bar_space_put(b, big);
		big->placed = 0;
	}
}
