/* A guest's virtio driver for the unit tests of devices/virtio (vdrv.h). */
#include "vdrv.h"

#include <check.h>
#include <string.h>
#include <unistd.h>

#include "bus.h"

static struct virtio_pci *cur;
static uint8_t *mem;
static uint16_t avail[VDRV_QMAX], used_seen[VDRV_QMAX];

void vdrv_attach(struct virtio_pci *vp, uint8_t *ram)
{
	cur = vp;
	mem = ram;
	memset(avail, 0, sizeof(avail));
	memset(used_seen, 0, sizeof(used_seen));
}

static int vdrv_gsi(void *o)
{
	static int next = 24;

	(void)o;
	return next++;
}

void vdrv_bus_add(struct pci_dev *d)
{
	static struct bus pio, mmio;
	static struct pci_bus pb;
	static bool up;
	struct pci_platform_ops ops = {.alloc_gsi = vdrv_gsi, .remap_inline = true};
	char err[256];

	if (!up) {
		bus_init(&pio);
		bus_init(&mmio);
		ck_assert_int_eq(pci_bus_init(&pb, &ops, &pio, &mmio, err, sizeof(err)), 0);
		up = true;
	}
	ck_assert_msg(pci_bus_add(&pb, d, err, sizeof(err)) == 0, "%s", err);
}

void vdrv_switch(struct virtio_pci *vp)
{
	cur = vp;
}

void vdrv_bar_w(uint64_t off, uint64_t v, unsigned len)
{
	virtio_pci_bar_write(cur, off, &v, len);
}

uint64_t vdrv_bar_r(uint64_t off, unsigned len)
{
	uint64_t v = 0;

	virtio_pci_bar_read(cur, off, &v, len);
	return v;
}

void vdrv_set_desc(unsigned q, unsigned i, uint64_t addr, uint32_t len, uint16_t flags,
		   uint16_t next)
{
	struct virtq_desc d = {addr, len, flags, next};

	memcpy(mem + VDRV_DESC(q) + 16 * i, &d, sizeof(d));
}

void vdrv_offer(unsigned q, uint16_t head)
{
	memcpy(mem + VDRV_AVAIL(q) + 4 + 2 * (avail[q] % VDRV_QSIZE), &head, 2);
	avail[q]++;
	__atomic_store_n((uint16_t *)(mem + VDRV_AVAIL(q) + 2), avail[q], __ATOMIC_RELEASE);
	vdrv_bar_w(VIRTIO_PCI_NOTIFY_OFF + 4 * q, q, 2);
}

uint16_t vdrv_avail_idx(unsigned q)
{
	return avail[q];
}

void vdrv_queue_init(unsigned q)
{
	vdrv_bar_w(VIRTIO_PCI_Q_SELECT, q, 2);
	vdrv_bar_w(VIRTIO_PCI_Q_SIZE, VDRV_QSIZE, 2);
	vdrv_bar_w(VIRTIO_PCI_Q_DESC, VDRV_DESC(q), 8);
	vdrv_bar_w(VIRTIO_PCI_Q_DRIVER, VDRV_AVAIL(q), 8);
	vdrv_bar_w(VIRTIO_PCI_Q_DEVICE, VDRV_USED(q), 8);
	vdrv_bar_w(VIRTIO_PCI_Q_ENABLE, 1, 2);
}

void vdrv_start(uint64_t features, unsigned nqueues)
{
	features |= 1ULL << 32; /* VIRTIO_F_VERSION_1 */
	vdrv_bar_w(VIRTIO_PCI_STATUS, 0, 1);
	vdrv_bar_w(VIRTIO_PCI_STATUS, 3, 1);
	vdrv_bar_w(VIRTIO_PCI_GFSELECT, 0, 4);
	vdrv_bar_w(VIRTIO_PCI_GF, (uint32_t)features, 4);
	vdrv_bar_w(VIRTIO_PCI_GFSELECT, 1, 4);
	vdrv_bar_w(VIRTIO_PCI_GF, (uint32_t)(features >> 32), 4);
	vdrv_bar_w(VIRTIO_PCI_STATUS, 3 | VIRTIO_STATUS_FEATURES_OK, 1);
	for (unsigned q = 0; q < nqueues; q++)
		vdrv_queue_init(q);
	vdrv_bar_w(VIRTIO_PCI_STATUS, 3 | VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK, 1);
}

uint16_t vdrv_used_idx(unsigned q)
{
	return __atomic_load_n((uint16_t *)(mem + VDRV_USED(q) + 2), __ATOMIC_ACQUIRE);
}

bool vdrv_wait_used(unsigned q, uint16_t want)
{
	for (int i = 0; i < 5000 && vdrv_used_idx(q) != want; i++)
		usleep(1000);
	return vdrv_used_idx(q) == want;
}

bool vdrv_used_next(unsigned q, uint32_t *id, uint32_t *len)
{
	for (int i = 0; i < 5000 && vdrv_used_idx(q) == used_seen[q]; i++)
		usleep(1000);
	if (vdrv_used_idx(q) == used_seen[q])
		return false;
	memcpy(id, mem + VDRV_USED(q) + 4 + 8 * (used_seen[q] % VDRV_QSIZE), 4);
	memcpy(len, mem + VDRV_USED(q) + 8 + 8 * (used_seen[q] % VDRV_QSIZE), 4);
	used_seen[q]++;
	return true;
}
