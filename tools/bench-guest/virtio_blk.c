/* Bench guest mode "vblk": a polled ring-3 virtio-blk driver (modern virtio-pci, split rings, one
 * request = header, data, status descriptors) for the workload engine, so that QEMU's virtio-blk
 * is measured by the very loop that measures the NVMe controllers (bench.mode=work). */
#include "bench.h"
#include "workload.h"

#define VB_BAR_GPA	   0xc0000000ULL
#define VB_ECAM		   0xe0000000ULL /* microvm's PCIe ECAM */
#define VB_QSIZE	   1024
#define VB_NQ		   4
#define PAGE		   4096
#define VIRTIO_CAP	   0x09
#define CAP_COMMON	   1
#define CAP_NOTIFY	   2
#define CAP_DEVICE	   4
#define ST_ACK		   1
#define ST_DRIVER	   2
#define ST_DRIVER_OK	   4
#define ST_FEATURES_OK	   8
#define F_BLK_MQ	   12
#define F_VERSION_1	   32
#define DESC_NEXT	   1
#define DESC_WRITE	   2
#define AVAIL_NO_INTERRUPT 1
#define USED_NO_NOTIFY	   1

struct vring_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

struct vb_req {
	uint32_t type, rsvd;
	uint64_t sector;
};

/* one queue's rings: descriptors, then the driver (avail) and device (used) areas, page-aligned */
struct vb_queue {
	struct vring_desc desc[VB_QSIZE];
	struct {
		uint16_t flags, idx, ring[VB_QSIZE], used_event;
	} __attribute__((aligned(PAGE))) avail;
	struct {
		uint16_t flags, idx;
		struct {
			uint32_t id, len;
		} ring[VB_QSIZE];
		uint16_t avail_event;
	} __attribute__((aligned(PAGE))) used;
} __attribute__((aligned(PAGE)));

static struct vb_queue vq[VB_NQ];
static struct vb_req hdr[VB_NQ][VB_QSIZE / 3];
static volatile uint8_t status[VB_NQ][VB_QSIZE / 3];
static uint16_t avail_idx[VB_NQ], used_seen[VB_NQ];
static volatile uint16_t *notify[VB_NQ];
static volatile uint8_t *common, *devcfg;
static volatile uint32_t *ecam;

static uint32_t cfg_read(unsigned devfn, unsigned reg)
{
	if (ecam)
		return ecam[(devfn << 12 | (reg & 0xffc)) / 4];
	outl(0xcf8, 0x80000000u | devfn << 8 | (reg & 0xfc));
	return inl(0xcfc);
}

static void cfg_write(unsigned devfn, unsigned reg, uint32_t v)
{
	if (ecam) {
		ecam[(devfn << 12 | (reg & 0xffc)) / 4] = v;
		return;
	}
	outl(0xcf8, 0x80000000u | devfn << 8 | (reg & 0xfc));
	outl(0xcfc, v);
}

#define C8(off)	 (*(volatile uint8_t *)(common + (off)))
#define C16(off) (*(volatile uint16_t *)(common + (off)))
#define C32(off) (*(volatile uint32_t *)(common + (off)))

static void c64(unsigned off, uint64_t v)
{
	C32(off) = (uint32_t)v;
	C32(off + 4) = (uint32_t)(v >> 32);
}

static bool find_vblk(unsigned *devfn)
{
	unsigned slot, pass;

	for (pass = 0; pass < 2; pass++, ecam = (volatile uint32_t *)VB_ECAM)
		for (slot = 0; slot < 32; slot++) {
			uint32_t id = cfg_read(slot << 3, 0);

			if (id == 0x10421af4 || id == 0x10011af4) {
				*devfn = slot << 3;
				return true;
			}
		}
	ecam = NULL;
	return false;
}

/* Places the BAR that the virtio capabilities name at VB_BAR_GPA and returns the structures. */
static bool map_caps(unsigned devfn, uint64_t *notify_base, uint32_t *notify_mult)
{
	unsigned ptr = cfg_read(devfn, 0x34) & 0xfc, n = 0, bar = 99;
	uint32_t off[5] = {0};

	while (ptr && n++ < 32) {
		uint32_t hdr0 = cfg_read(devfn, ptr), w1 = cfg_read(devfn, ptr + 4);
		unsigned type = (hdr0 >> 24) & 0xff;

		if ((hdr0 & 0xff) == VIRTIO_CAP && type >= CAP_COMMON && type <= CAP_DEVICE) {
			bar = w1 & 0xff;
			off[type] = cfg_read(devfn, ptr + 8);
			if (type == CAP_NOTIFY)
				*notify_mult = cfg_read(devfn, ptr + 16);
		}
		ptr = (hdr0 >> 8) & 0xfc;
	}
	if (bar > 5)
		return false;
	cfg_write(devfn, 4, 0);
	cfg_write(devfn, 0x10 + 4 * bar, (uint32_t)VB_BAR_GPA);
	if ((cfg_read(devfn, 0x10 + 4 * bar) & 0x6) == 0x4) /* 64-bit BAR */
		cfg_write(devfn, 0x14 + 4 * bar, 0);
	cfg_write(devfn, 4, 0x6);
	common = (volatile uint8_t *)(VB_BAR_GPA + off[CAP_COMMON]);
	devcfg = (volatile uint8_t *)(VB_BAR_GPA + off[CAP_DEVICE]);
	*notify_base = VB_BAR_GPA + off[CAP_NOTIFY];
	return true;
}

static bool vb_submit(unsigned q, unsigned slot, bool write, uint64_t off, unsigned len,
		      uint64_t buf)
{
	struct vring_desc *d = &vq[q].desc[slot * 3];

	hdr[q][slot] = (struct vb_req){.type = write ? 1 : 0, .sector = off >> 9};
	status[q][slot] = 0xff;
	d[0] = (struct vring_desc){(uint64_t)&hdr[q][slot], sizeof(hdr[0][0]), DESC_NEXT,
				   (uint16_t)(slot * 3 + 1)};
	d[1] = (struct vring_desc){buf, len, (uint16_t)(DESC_NEXT | (write ? 0 : DESC_WRITE)),
				   (uint16_t)(slot * 3 + 2)};
	d[2] = (struct vring_desc){(uint64_t)&status[q][slot], 1, DESC_WRITE, 0};
	vq[q].avail.ring[avail_idx[q]++ % VB_QSIZE] = (uint16_t)(slot * 3);
	return true;
}

static void vb_kick(unsigned q)
{
	__asm__ volatile("mfence" ::: "memory");
	*(volatile uint16_t *)&vq[q].avail.idx = avail_idx[q];
	__asm__ volatile("mfence" ::: "memory");
	/* a device that is still working through the ring asks not to be notified */
	if (!(*(volatile uint16_t *)&vq[q].used.flags & USED_NO_NOTIFY))
		*notify[q] = (uint16_t)q;
}

static unsigned vb_reap(unsigned q, uint16_t *slots, unsigned max, unsigned *errors)
{
	unsigned n = 0;

	while (n < max && *(volatile uint16_t *)&vq[q].used.idx != used_seen[q]) {
		uint32_t id;

		__asm__ volatile("" ::: "memory");
		id = *(volatile uint32_t *)&vq[q].used.ring[used_seen[q]++ % VB_QSIZE].id;
		if (id % 3 || id / 3 >= VB_QSIZE / 3) {
			(*errors)++;
			continue;
		}
		if (status[q][id / 3] != 0)
			(*errors)++;
		slots[n++] = (uint16_t)(id / 3);
	}
	return n;
}

static void vblk_ring3(void)
{
	struct work_params p;
	struct work_dev dev = {.name = "virtio-blk",
			       .submit = vb_submit,
			       .kick = vb_kick,
			       .reap = vb_reap,
			       .blk_shift = 9};
	uint64_t notify_base = 0, feat;
	uint32_t mult = 0, qsize;
	unsigned devfn, q, nq = 1;

	work_params_get(&p);
	if (!find_vblk(&devfn) || !map_caps(devfn, &notify_base, &mult)) {
		bench_puts("bench: work FAIL no modern virtio-blk device\n");
		return;
	}
	C8(0x14) = 0;
	while (C8(0x14))
		;
	C8(0x14) = ST_ACK | ST_DRIVER;
	C32(0x00) = 0;
	feat = C32(0x04);
	C32(0x00) = 1;
	feat |= (uint64_t)C32(0x04) << 32;
	if (!(feat & (1ULL << F_VERSION_1))) {
		bench_puts("bench: work FAIL virtio-blk without VERSION_1\n");
		return;
	}
	if (p.nq > 1 && (feat & (1ULL << F_BLK_MQ)))
		nq = *(volatile uint16_t *)(devcfg + 34);
	if (nq > p.nq)
		nq = p.nq;
	if (nq > VB_NQ)
		nq = VB_NQ;
	C32(0x08) = 0;
	C32(0x0c) = nq > 1 ? 1u << F_BLK_MQ : 0;
	C32(0x08) = 1;
	C32(0x0c) = 1; /* VERSION_1 */
	C8(0x14) = ST_ACK | ST_DRIVER | ST_FEATURES_OK;
	if (!(C8(0x14) & ST_FEATURES_OK)) {
		bench_puts("bench: work FAIL virtio-blk refused the features\n");
		return;
	}
	qsize = VB_QSIZE;
	for (q = 0; q < nq; q++) {
		C16(0x16) = (uint16_t)q;
		if (C16(0x18) < qsize)
			qsize = C16(0x18);
	}
	for (q = 0; q < nq; q++) {
		C16(0x16) = (uint16_t)q;
		C16(0x18) = (uint16_t)qsize;
		C16(0x1a) = 0xffff; /* no MSI-X vector: polled */
		c64(0x20, (uint64_t)vq[q].desc);
		c64(0x28, (uint64_t)&vq[q].avail);
		c64(0x30, (uint64_t)&vq[q].used);
		vq[q].avail.flags = AVAIL_NO_INTERRUPT;
		notify[q] = (volatile uint16_t *)(notify_base + (uint64_t)C16(0x1e) * mult);
		C16(0x1c) = 1;
	}
	C8(0x14) = ST_ACK | ST_DRIVER | ST_FEATURES_OK | ST_DRIVER_OK;
	dev.nqueues = nq;
	dev.depth = qsize / 3;
	dev.capacity =
	    (*(volatile uint32_t *)devcfg | (uint64_t) * (volatile uint32_t *)(devcfg + 4) << 32)
	    << 9;
	bench_printf("bench: work virtio-blk %lu sectors, %u queues of %u entries%s\n",
		     dev.capacity >> 9, nq, qsize, ecam ? " (ECAM)" : "");
	work_run(&dev, &p);
}

BENCH_MODE(vblk, NULL, vblk_ring3);
