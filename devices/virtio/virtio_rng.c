/* virtio-rng (virtio 1.x, 5.4) on the PCI transport: one request queue whose writable buffers
 * are filled from an entropy file (cloud-hypervisor's rng.src, /dev/urandom by default). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsutil.h"
#include "virtio_pci.h"
#include "virtio_rng.h"

#define RNG_QUEUE_SIZE 256
#define RNG_MAX_CHAIN  (64 * 1024) /* bytes given per request: a guest cannot make us loop */
#define RNG_MAX_CHAINS 256	   /* requests served per kick; the rest on the next one */

struct virtio_rng {
	struct virtio_pci vp;
	int fd;
	uint64_t bytes, requests;
	struct virtq_chain chain; /* big: kept out of the vCPU stack */
};

/* Fills the chain's writable buffers; returns the bytes written. */
static uint32_t rng_fill(struct virtio_rng *r, const struct virtq_chain *c)
{
	uint32_t done = 0;
	unsigned i;

	for (i = 0; i < c->nseg && done < RNG_MAX_CHAIN; i++) {
		uint32_t want = c->seg[i].len;
		ssize_t n;

		if (!c->seg[i].writable)
			continue;
		if (want > RNG_MAX_CHAIN - done)
			want = RNG_MAX_CHAIN - done;
		n = read(r->fd, c->seg[i].host, want);
		if (n <= 0)
			break; /* an empty /dev/random: the driver asks again */
		done += (uint32_t)n;
		if ((uint32_t)n < want)
			break;
	}
	return done;
}

static void rng_notify(struct virtio_pci *vp, unsigned qi)
{
	struct virtio_rng *r = vp->opaque;
	struct virtq *q = &vp->q[qi].vq;
	char err[160];
	unsigned served = 0;
	int got;

	while (served < RNG_MAX_CHAINS) {
		got = virtq_pop(q, &r->chain, err, sizeof(err));
		if (got < 0) {
			virtio_pci_ring_error(vp, qi, err);
			break;
		}
		if (!got) {
			/* with the event index: ask for a kick at the next entry, then look again
			 */
			if (!virtq_has_avail(q))
				break;
			continue;
		}
		uint32_t n = rng_fill(r, &r->chain);

		virtq_push(q, r->chain.head, n);
		r->bytes += n;
		r->requests++;
		served++;
	}
	if (served)
		virtio_pci_queue_interrupt(vp, qi);
}

static const struct virtio_dev_ops rng_ops = {
    .notify = rng_notify,
};

int virtio_rng_create(struct virtio_rng **out, const char *id, const char *src,
		      const struct guest_mem *gm, char *err, unsigned errlen)
{
	struct virtio_rng *r;
	char what[96];
	int fd, ret;

	*out = NULL;
	/* a client names src: only the kernel's entropy devices, opened without following a
	 * symbolic link and without blocking (an empty /dev/random is asked again later) */
	snprintf(what, sizeof(what), "rng %s: entropy source", id);
	fd = fsutil_open(NULL, what, src, O_RDONLY, 0, FSUTIL_ENTROPY, err, errlen);
	if (fd < 0)
		return fd;
	r = calloc(1, sizeof(*r));
	if (!r) {
		close(fd);
		snprintf(err, errlen, "rng %s: out of memory", id);
		return -ENOMEM;
	}
	r->fd = fd;
	/* class 0xff0000: no PCI class fits an entropy source, as other VMMs do */
	ret = virtio_pci_init(&r->vp, id, VIRTIO_ID_RNG, 0xff0000, 0, 1, RNG_QUEUE_SIZE, &rng_ops,
			      r, gm, err, errlen);
	if (ret) {
		close(fd);
		free(r);
		return ret;
	}
	*out = r;
	return 0;
}

struct pci_dev *virtio_rng_pci(struct virtio_rng *r)
{
	return &r->vp.pci;
}

uint64_t virtio_rng_bytes(const struct virtio_rng *r)
{
	return r->bytes;
}

void virtio_rng_destroy(struct virtio_rng *r)
{
	if (!r)
		return;
	virtio_pci_exit(&r->vp);
	close(r->fd);
	free(r);
}

/* The device model: its configuration is the entropy source's path. */
static int rng_model_create(const struct dev_host *h, const void *cfg, const char *id, unsigned idx,
			    void **dev, char *err, unsigned errlen)
{
	(void)idx;
	return virtio_rng_create((struct virtio_rng **)dev, id, cfg, h->gm, err, errlen);
}

static struct pci_dev *rng_model_pci(void *dev)
{
	return virtio_rng_pci(dev);
}

/* Snapshots: the rng holds nothing of its own beyond the transport (no request is ever kept:
 * each is served on its kick). buf NULL asks for the size. */
static int rng_model_save(void *dev, void *buf, uint64_t *len, char *err, unsigned errlen)
{
	struct virtio_rng *r = dev;
	size_t need = virtio_pci_state_size(&r->vp);

	if (buf && *len < need) {
		snprintf(err, errlen, "rng %s: state needs %zu bytes", r->vp.pci.name, need);
		return -ENOSPC;
	}
	if (buf)
		virtio_pci_save(&r->vp, buf);
	*len = need;
	return 0;
}

static int rng_model_restore(void *dev, const void *buf, uint64_t len, char *err, unsigned errlen)
{
	struct virtio_rng *r = dev;

	return virtio_pci_restore(&r->vp, buf, (size_t)len, err, errlen);
}

static void rng_model_destroy(void *dev)
{
	virtio_rng_destroy(dev);
}

const struct dev_model virtio_rng_model = {
    .name = "virtio-rng",
    .create = rng_model_create,
    .pci = rng_model_pci,
    .save = rng_model_save,
    .restore = rng_model_restore,
    .destroy = rng_model_destroy,
};
