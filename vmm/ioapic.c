/* IOAPIC (82093AA-style, version 0x20) in user space for split-irqchip VMs: redirection table,
 * edge and level delivery as MSIs, Remote IRR cleared by EOI. */
#include <errno.h>
#include <string.h>

#include "ioapic.h"

#define IOAPIC_VERSION 0x20
#define REG_ID	       0x00
#define REG_VER	       0x01
#define REG_ARB	       0x02
#define REG_REDIR      0x10

#define RTE_VECTOR	  0xffULL
#define RTE_DELMODE_SHIFT 8
#define RTE_DESTMODE	  (1ULL << 11)
#define RTE_REMOTE_IRR	  (1ULL << 14)
#define RTE_LEVEL	  (1ULL << 15)
#define RTE_MASK	  (1ULL << 16)
#define RTE_RO_BITS	  ((1ULL << 12) | RTE_REMOTE_IRR) /* delivery status, Remote IRR */

void ioapic_init(struct ioapic *io, int (*send_msi)(void *, uint64_t, uint32_t), void *opaque)
{
	unsigned i;

	memset(io, 0, sizeof(*io));
	pthread_mutex_init(&io->lock, NULL);
	for (i = 0; i < IOAPIC_PINS; i++)
		io->redir[i] = RTE_MASK;
	io->send_msi = send_msi;
	io->opaque = opaque;
}

/* A redirection entry as an interrupt message. */
static void ioapic_msg(uint64_t e, uint64_t *addr, uint32_t *data)
{
	/* Destination field bits 56..63, physical or logical, as the MSI address format. */
	*addr = 0xfee00000ULL | ((e >> 56) << 12) | ((e & RTE_DESTMODE) ? (1ULL << 2) : 0);
	*data = (uint32_t)(e & RTE_VECTOR) | (uint32_t)(((e >> RTE_DELMODE_SHIFT) & 7) << 8) |
		((e & RTE_LEVEL) ? (1u << 15) | (1u << 14) : 0);
}

/* Caller holds the lock. */
static void ioapic_route(struct ioapic *io, unsigned pin)
{
	uint64_t e = io->redir[pin], addr;
	uint32_t data;

	if (!io->route)
		return;
	ioapic_msg(e, &addr, &data);
	io->route(io->opaque, pin, addr, data, (e & RTE_LEVEL) && !(e & RTE_MASK));
}

/* Caller holds the lock. */
static void ioapic_deliver(struct ioapic *io, unsigned pin)
{
	uint64_t e = io->redir[pin];
	uint64_t addr;
	uint32_t data;

	if (e & RTE_MASK)
		return;
	if ((e & RTE_LEVEL) && (e & RTE_REMOTE_IRR))
		return;
	ioapic_msg(e, &addr, &data);
	if (e & RTE_LEVEL)
		io->redir[pin] |= RTE_REMOTE_IRR;
	io->send_msi(io->opaque, addr, data);
}

uint32_t ioapic_mmio_read(struct ioapic *io, uint64_t off)
{
	uint32_t v = 0;
	unsigned idx;

	if (off != 0x10)
		return off == 0x00 ? io->sel : 0;
	pthread_mutex_lock(&io->lock);
	switch (io->sel) {
	case REG_ID:
	case REG_ARB:
		v = (uint32_t)io->id << 24;
		break;
	case REG_VER:
		v = IOAPIC_VERSION | ((IOAPIC_PINS - 1) << 16);
		break;
	default:
		idx = (io->sel - REG_REDIR) / 2;
		if (io->sel >= REG_REDIR && idx < IOAPIC_PINS)
			v = (uint32_t)(io->redir[idx] >> ((io->sel & 1) ? 32 : 0));
		break;
	}
	pthread_mutex_unlock(&io->lock);
	return v;
}

void ioapic_mmio_write(struct ioapic *io, uint64_t off, uint32_t val)
{
	unsigned idx;

	pthread_mutex_lock(&io->lock);
	if (off == 0x00) {
		io->sel = val & 0xff;
	} else if (off == 0x40) {
		pthread_mutex_unlock(&io->lock);
		ioapic_eoi(io, (uint8_t)val);
		return;
	} else if (off == 0x10) {
		if (io->sel == REG_ID) {
			io->id = (val >> 24) & 0xf;
		} else if (io->sel >= REG_REDIR &&
			   (idx = (io->sel - REG_REDIR) / 2) < IOAPIC_PINS) {
			uint64_t e = io->redir[idx], ro = e & RTE_RO_BITS;

			if (io->sel & 1)
				e = (e & 0xffffffffULL) | ((uint64_t)val << 32);
			else
				e = (e & ~0xffffffffULL) | val;
			io->redir[idx] = (e & ~RTE_RO_BITS) | ro;
			ioapic_route(io, idx);
			/* Unmasking a pin whose line is active delivers it now (level). */
			if (io->level[idx] && (io->redir[idx] & RTE_LEVEL))
				ioapic_deliver(io, idx);
		}
	}
	pthread_mutex_unlock(&io->lock);
}

int ioapic_set_irq(struct ioapic *io, unsigned pin, bool level)
{
	bool was;

	if (pin >= IOAPIC_PINS)
		return -EINVAL;
	pthread_mutex_lock(&io->lock);
	was = io->level[pin];
	io->level[pin] = level;
	/* Edge pins fire on the rising edge; level pins on every assertion (Remote IRR gates). */
	if (level && (!was || (io->redir[pin] & RTE_LEVEL)))
		ioapic_deliver(io, pin);
	pthread_mutex_unlock(&io->lock);
	return 0;
}

void ioapic_eoi(struct ioapic *io, uint8_t vector)
{
	bool eoi[IOAPIC_PINS] = {false};
	unsigned i;

	pthread_mutex_lock(&io->lock);
	for (i = 0; i < IOAPIC_PINS; i++) {
		uint64_t e = io->redir[i];

		if ((e & RTE_VECTOR) != vector || !(e & RTE_REMOTE_IRR))
			continue;
		io->redir[i] &= ~RTE_REMOTE_IRR;
		eoi[i] = true;
	}
	pthread_mutex_unlock(&io->lock);
	/* The source hears of the EOI first: a line it lowers now is not delivered again. */
	for (i = 0; i < IOAPIC_PINS && io->eoi; i++)
		if (eoi[i])
			io->eoi(io->opaque, i);
	pthread_mutex_lock(&io->lock);
	for (i = 0; i < IOAPIC_PINS; i++)
		if (eoi[i] && io->level[i])
			ioapic_deliver(io, i); /* unless delivered again meanwhile (Remote IRR) */
	pthread_mutex_unlock(&io->lock);
}

void ioapic_save(struct ioapic *io, struct ioapic_state *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&io->lock);
	st->id = io->id;
	st->sel = io->sel;
	memcpy(st->redir, io->redir, sizeof(st->redir));
	for (unsigned i = 0; i < IOAPIC_PINS; i++)
		st->level[i] = io->level[i];
	pthread_mutex_unlock(&io->lock);
}

int ioapic_restore(struct ioapic *io, const struct ioapic_state *st)
{
	if (st->id > 0xff || st->sel > 0xff)
		return -EINVAL;
	for (unsigned i = 0; i < IOAPIC_PINS; i++)
		if (st->level[i] > 1)
			return -EINVAL;
	pthread_mutex_lock(&io->lock);
	io->id = (uint8_t)st->id;
	io->sel = st->sel;
	memcpy(io->redir, st->redir, sizeof(io->redir));
	for (unsigned i = 0; i < IOAPIC_PINS; i++) {
		io->level[i] = st->level[i];
		ioapic_route(io, i);
	}
	pthread_mutex_unlock(&io->lock);
	return 0;
}
