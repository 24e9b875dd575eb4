/* ACPI PCI hotplug controller (hotplug.h): the guest's AML reads which slots changed and writes
 * the slot it ejects; lvmm plugs, asks for removal and waits for the eject here. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hotplug.h"

void hotplug_init(struct hotplug *h, void (*notify)(void *opaque), void *opaque)
{
	pthread_condattr_t ca;

	memset(h, 0, sizeof(*h));
	pthread_mutex_init(&h->lock, NULL);
	/* timed waits must not jump with the wall clock */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cond, &ca);
	pthread_condattr_destroy(&ca);
	h->notify = notify;
	h->opaque = opaque;
}

void hotplug_destroy(struct hotplug *h)
{
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->lock);
}

static bool hotplug_slot_ok(unsigned slot)
{
	return slot >= 1 && slot < HOTPLUG_SLOTS;
}

static void hotplug_event(struct hotplug *h)
{
	if (h->notify)
		h->notify(h->opaque);
}

int hotplug_boot_present(struct hotplug *h, unsigned slot)
{
	int r = 0;

	if (!hotplug_slot_ok(slot))
		return -EINVAL;
	pthread_mutex_lock(&h->lock);
	if (h->state[slot] != HOTPLUG_EMPTY)
		r = -EBUSY;
	else
		h->state[slot] = HOTPLUG_PRESENT;
	pthread_mutex_unlock(&h->lock);
	return r;
}

int hotplug_plug(struct hotplug *h, unsigned slot)
{
	if (!hotplug_slot_ok(slot))
		return -EINVAL;
	pthread_mutex_lock(&h->lock);
	if (h->state[slot] != HOTPLUG_EMPTY) {
		pthread_mutex_unlock(&h->lock);
		return -EBUSY;
	}
	h->state[slot] = HOTPLUG_PRESENT;
	h->up |= 1u << slot;
	h->down &= ~(1u << slot);
	h->events++;
	pthread_mutex_unlock(&h->lock);
	hotplug_event(h);
	return 0;
}

int hotplug_unplug(struct hotplug *h, unsigned slot)
{
	if (!hotplug_slot_ok(slot))
		return -EINVAL;
	pthread_mutex_lock(&h->lock);
	if (h->state[slot] != HOTPLUG_PRESENT && h->state[slot] != HOTPLUG_REMOVING) {
		int r = h->state[slot] == HOTPLUG_EJECTED ? 0 : -ENOENT;

		pthread_mutex_unlock(&h->lock);
		return r; /* already ejected: nothing to ask */
	}
	h->state[slot] = HOTPLUG_REMOVING;
	/* a device check the guest has not read yet would only re-add the device */
	h->up &= ~(1u << slot);
	h->down |= 1u << slot;
	h->events++;
	pthread_mutex_unlock(&h->lock);
	hotplug_event(h);
	return 0;
}

int hotplug_wait_eject(struct hotplug *h, unsigned slot, unsigned timeout_ms)
{
	struct timespec until;
	int r = 0;

	if (!hotplug_slot_ok(slot))
		return -EINVAL;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&h->lock);
	while (h->state[slot] == HOTPLUG_REMOVING && r != ETIMEDOUT)
		r = pthread_cond_timedwait(&h->cond, &h->lock, &until);
	r = h->state[slot] == HOTPLUG_EJECTED ? 0 : -ETIMEDOUT;
	pthread_mutex_unlock(&h->lock);
	return r;
}

void hotplug_release(struct hotplug *h, unsigned slot)
{
	if (!hotplug_slot_ok(slot))
		return;
	pthread_mutex_lock(&h->lock);
	h->state[slot] = HOTPLUG_EMPTY;
	h->up &= ~(1u << slot);
	h->down &= ~(1u << slot);
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

enum hotplug_slot_state hotplug_state(struct hotplug *h, unsigned slot)
{
	enum hotplug_slot_state s;

	if (slot >= HOTPLUG_SLOTS)
		return HOTPLUG_EMPTY;
	pthread_mutex_lock(&h->lock);
	s = h->state[slot];
	pthread_mutex_unlock(&h->lock);
	return s;
}

/* A guest may poke the block at will: log the first few odd accesses, then powers of two. */
static void hotplug_bad(struct hotplug *h, const char *what, uint64_t off, unsigned len, uint32_t v)
{
	uint64_t n = ++h->bad_accesses;

	if (n <= 4 || !(n & (n - 1)))
		fprintf(stderr,
			"lvmm: pci hotplug: %s at register 0x%llx (%u bytes, value 0x%x): ignored, "
			"%llu so far\n",
			what, (unsigned long long)off, len, v, (unsigned long long)n);
}

static void hotplug_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct hotplug *h = opaque;
	uint32_t v = 0;
	unsigned s;

	memset(data, 0, len);
	pthread_mutex_lock(&h->lock);
	if (len != 4 || (off & 3)) {
		hotplug_bad(h, "read of odd size or alignment", off, len, 0);
		pthread_mutex_unlock(&h->lock);
		return;
	}
	switch (off) {
	case HOTPLUG_REG_PCIU:
		v = h->up;
		h->up = 0;
		break;
	case HOTPLUG_REG_PCID:
		v = h->down;
		h->down = 0;
		break;
	case HOTPLUG_REG_SLOT:
		for (s = 1; s < HOTPLUG_SLOTS; s++)
			if (h->state[s] == HOTPLUG_PRESENT || h->state[s] == HOTPLUG_REMOVING)
				v |= 1u << s;
		break;
	default:
		break; /* B0EJ is write-only and reads 0 */
	}
	pthread_mutex_unlock(&h->lock);
	memcpy(data, &v, 4);
}

/* The eject: only a slot lvmm asked to remove goes. A guest that ejects a device on its own
 * (acpiphp's sysfs power switch) keeps it in lvmm's config; a rescan brings it back. */
static void hotplug_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct hotplug *h = opaque;
	uint32_t v;
	unsigned slot;

	if (len != 4 || off != HOTPLUG_REG_B0EJ) {
		pthread_mutex_lock(&h->lock);
		hotplug_bad(h, len != 4 ? "write of odd size" : "write to a read-only register",
			    off, len, 0);
		pthread_mutex_unlock(&h->lock);
		return;
	}
	memcpy(&v, data, 4);
	pthread_mutex_lock(&h->lock);
	if (!v || (v & (v - 1)) || (v & 1)) {
		hotplug_bad(h, "eject of no slot, several slots or the host bridge", off, len, v);
		pthread_mutex_unlock(&h->lock);
		return;
	}
	slot = (unsigned)__builtin_ctz(v);
	if (h->state[slot] != HOTPLUG_REMOVING) {
		hotplug_bad(h, "eject of a slot lvmm did not ask to remove", off, len, v);
		pthread_mutex_unlock(&h->lock);
		return;
	}
	h->state[slot] = HOTPLUG_EJECTED;
	h->ejects++;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

const struct bus_ops hotplug_bus_ops = {.read = hotplug_read, .write = hotplug_write};
