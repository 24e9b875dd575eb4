/* Guest RAM lookups for devices (guest_mem.h): translate guest-physical ranges to host pointers,
 * refusing anything that is not wholly inside RAM. Every address here may come from the guest. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guest_mem.h"

static const struct gmem_slot *gmem_slot_of(const struct guest_mem *gm, uint64_t gpa)
{
	unsigned i;

	for (i = 0; i < gm->nslots && i < GMEM_MAX_SLOTS; i++) {
		const struct gmem_slot *s = &gm->slots[i];

		if (gpa >= s->gpa && gpa - s->gpa < s->size)
			return s;
	}
	return NULL;
}

void *gmem_ptr(const struct guest_mem *gm, uint64_t gpa, uint64_t len)
{
	const struct gmem_slot *s = gmem_slot_of(gm, gpa);

	if (!s)
		return NULL;
	/* Compare lengths, never compute gpa + len: that may wrap. */
	if (len > s->size - (gpa - s->gpa))
		return NULL;
	return s->host + (gpa - s->gpa);
}

static int gmem_copy(const struct guest_mem *gm, uint64_t gpa, void *buf, uint64_t len,
		     int to_guest)
{
	uint8_t *p = buf;
	uint64_t a = gpa, left = len;

	if (gpa + len < gpa)
		return -EFAULT;
	/* Check the whole range first so that a failed copy leaves nothing half-written. */
	while (left) {
		const struct gmem_slot *s = gmem_slot_of(gm, a);
		uint64_t n;

		if (!s)
			return -EFAULT;
		n = s->size - (a - s->gpa);
		if (n >= left)
			break;
		a += n;
		left -= n;
	}
	while (len) {
		const struct gmem_slot *s = gmem_slot_of(gm, gpa);
		uint64_t n;

		if (!s)
			return -EFAULT;
		n = s->size - (gpa - s->gpa);
		if (n > len)
			n = len;
		if (to_guest)
			memcpy(s->host + (gpa - s->gpa), p, n);
		else
			memcpy(p, s->host + (gpa - s->gpa), n);
		p += n;
		gpa += n;
		len -= n;
	}
	return 0;
}

int gmem_read(const struct guest_mem *gm, uint64_t gpa, void *dst, uint64_t len)
{
	return gmem_copy(gm, gpa, dst, len, 0);
}

int gmem_write(const struct guest_mem *gm, uint64_t gpa, const void *src, uint64_t len)
{
	return gmem_copy(gm, gpa, (void *)src, len, 1);
}

void gmem_init_buffer(struct guest_mem *gm, void *buf, uint64_t size)
{
	memset(gm, 0, sizeof(*gm));
	gm->memfd = -1;
	gm->size = size;
	gm->nslots = 1;
	gm->slots[0] = (struct gmem_slot){.gpa = 0, .size = size, .host = buf, .fd_off = 0};
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int gmem_populate(void *host, uint64_t len)
{
	volatile uint8_t *p = host;
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t off;

	if (!len)
		return 0;
	for (;;) {
		if (!madvise(host, len, MADV_POPULATE_WRITE))
			return 0;
		if (errno != EINTR)
			break;
	}
	if (errno != EINVAL)
		return errno == EFAULT ? -ENOMEM : -errno; /* EFAULT: a page could not be had */
	/* Older kernels: a write fault per page, each byte written back unchanged. */
	if (pg <= 0)
		pg = 4096;
	for (off = 0; off < len; off += (uint64_t)pg)
		p[off] = p[off];
	return 0;
}
