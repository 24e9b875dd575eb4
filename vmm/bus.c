/* PIO and MMIO address-range dispatch (bus.h): a small sorted table under a rwlock.
 * Lookups happen on every vCPU exit, changes only when devices (re)map BARs. */
#include <errno.h>
#include <string.h>

#include "bus.h"

void bus_init(struct bus *b)
{
	memset(b, 0, sizeof(*b));
	pthread_rwlock_init(&b->lock, NULL);
}

static bool range_overlaps(const struct bus_range *r, uint64_t base, uint64_t len)
{
	/* Both ranges are non-empty and do not wrap (checked at registration). */
	return base < r->base + r->len && r->base < base + len;
}

int bus_register(struct bus *b, uint64_t base, uint64_t len, const struct bus_ops *ops,
		 void *opaque, const char *name)
{
	unsigned i, pos;
	int ret = 0;

	if (!len || base + len < base || !ops)
		return -EINVAL;
	pthread_rwlock_wrlock(&b->lock);
	if (b->n >= BUS_MAX_RANGES) {
		ret = -ENOSPC;
		goto out;
	}
	pos = b->n;
	for (i = 0; i < b->n; i++) {
		if (range_overlaps(&b->r[i], base, len)) {
			ret = -EEXIST;
			goto out;
		}
		if (pos == b->n && base < b->r[i].base)
			pos = i;
	}
	/* Keep the table sorted by base so lookups can stop early. */
	memmove(&b->r[pos + 1], &b->r[pos], (b->n - pos) * sizeof(b->r[0]));
	b->r[pos] = (struct bus_range){
	    .base = base, .len = len, .ops = ops, .opaque = opaque, .name = name};
	b->n++;
out:
	pthread_rwlock_unlock(&b->lock);
	return ret;
}

int bus_unregister(struct bus *b, uint64_t base, void *opaque)
{
	unsigned i;
	int ret = -ENOENT;

	pthread_rwlock_wrlock(&b->lock);
	for (i = 0; i < b->n; i++) {
		if (b->r[i].base == base && b->r[i].opaque == opaque) {
			memmove(&b->r[i], &b->r[i + 1], (b->n - i - 1) * sizeof(b->r[0]));
			b->n--;
			ret = 0;
			break;
		}
	}
	pthread_rwlock_unlock(&b->lock);
	return ret;
}

bool bus_access(struct bus *b, uint64_t addr, void *data, unsigned len, bool is_write)
{
	const struct bus_range *r = NULL;
	unsigned lo = 0, hi;

	pthread_rwlock_rdlock(&b->lock);
	hi = b->n;
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (addr < b->r[mid].base) {
			hi = mid;
		} else if (addr - b->r[mid].base >= b->r[mid].len) {
			lo = mid + 1;
		} else {
			r = &b->r[mid];
			break;
		}
	}
	/* An access must fit entirely inside one device's range. */
	if (r && (len > r->len || addr - r->base > r->len - len))
		r = NULL;
	if (!r) {
		pthread_rwlock_unlock(&b->lock);
		if (!is_write)
			memset(data, 0xff, len);
		return false;
	}
	if (is_write) {
		if (r->ops->write)
			r->ops->write(r->opaque, addr - r->base, data, len);
	} else {
		if (r->ops->read)
			r->ops->read(r->opaque, addr - r->base, data, len);
		else
			memset(data, 0xff, len);
	}
	pthread_rwlock_unlock(&b->lock);
	return true;
}
