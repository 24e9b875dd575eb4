/* libFuzzer target for what a restore reads from a snapshot directory: the state file's parser
 * (every section found and copied at several sizes, memory.bin's trailer checked against the
 * header), and the saved bytes of COM1, the user-space IOAPIC, the legacy ports, a virtio-rng, a
 * virtio-net (on a socket pair) and a virtio-vsock on a PCI bus (transport, queues, config space,
 * MSI-X, the device's own head) restored into live models; what a device accepts must save and
 * restore again. Every byte is as untrusted as a file a client points lvmm at. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bus.h"
#include "fuzz_util.h"
#include "guest_mem.h"
#include "ioapic.h"
#include "legacy.h"
#include "pci.h"
#include "serial.h"
#include "snapshot_fmt.h"
#include "virtio/virtio_pci.h"
#include "virtio/virtio_net.h"
#include "virtio/virtio_rng.h"
#include "virtio/virtio_vsock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct bus pio, mmio;
static struct pci_bus pb;
static struct virtio_rng *rng;
static void *net, *vsock;
static char vsock_dir[64] = "/tmp/lvmm-fuzz-snap-XXXXXX";
static struct guest_mem gm;
static uint8_t ram[1 << 16];
static int next_gsi = 24;

static int fake_alloc_gsi(void *o)
{
	(void)o;
	return next_gsi < 1000 ? next_gsi++ : -1;
}

static int fake_msi(void *o, uint64_t addr, uint32_t data)
{
	(void)o;
	(void)addr;
	(void)data;
	return 0;
}

/* The vsock device's socket and its directory go with the process. */
static void cleanup(void)
{
	char path[96];

	snprintf(path, sizeof(path), "%s/v.sock", vsock_dir);
	unlink(path);
	rmdir(vsock_dir);
}

static void setup(void)
{
	struct pci_platform_ops ops = {.alloc_gsi = fake_alloc_gsi,
				       .set_msi_route = fz_route_ok,
				       .irqfd = fz_irqfd_ok,
				       .remap_inline = true};
	char err[256];

	gmem_init_buffer(&gm, ram, sizeof(ram));
	bus_init(&pio);
	bus_init(&mmio);
	struct dev_host h = {.gm = &gm, .cpus = 1};
	struct virtio_net_config nc = {.num_queues = 2, .nfds = 1};
	struct virtio_vsock_config vc = {.cid = 3};
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) || !mkdtemp(vsock_dir))
		abort();
	atexit(cleanup);
	nc.fds[0] = sv[0];
	snprintf(vc.socket, sizeof(vc.socket), "%s/v.sock", vsock_dir);
	if (pci_bus_init(&pb, &ops, &pio, &mmio, err, sizeof(err)) ||
	    virtio_rng_create(&rng, "rng0", "/dev/urandom", &gm, err, sizeof(err)) ||
	    pci_bus_add(&pb, virtio_rng_pci(rng), err, sizeof(err)) ||
	    virtio_net_model.create(&h, &nc, "net0", 0, &net, err, sizeof(err)) ||
	    pci_bus_add(&pb, virtio_net_model.pci(net), err, sizeof(err)) ||
	    virtio_vsock_model.create(&h, &vc, "vsock0", 0, &vsock, err, sizeof(err)) ||
	    pci_bus_add(&pb, virtio_vsock_model.pci(vsock), err, sizeof(err))) {
		fprintf(stderr, "fuzz_snapshot: set-up: %s\n", err);
		abort();
	}
	close(sv[0]); /* the device holds a duplicate; sv[1] stays the peer */
	/* paused, as a VM being restored is: the devices' threads stay out of the rings */
	virtio_net_model.pause(net);
	virtio_vsock_model.pause(vsock);
}

/* A device's saved bytes, most often at the size it saves, restored; what is accepted must save
 * and restore again. */
static void fuzz_device(const struct dev_model *m, void *dev, const uint8_t *p, size_t n,
			bool exact)
{
	uint64_t want = 0, len;
	uint8_t *buf, *again;
	char err[256];

	if (m->save(dev, NULL, &want, err, sizeof(err)))
		abort();
	buf = calloc(1, want + 16);
	again = calloc(1, want + 16);
	if (!buf || !again)
		abort();
	memcpy(buf, p, n < want + 16 ? n : want + 16);
	len = exact ? want : (n < want + 16 ? n : want + 16);
	err[0] = 0;
	if (m->restore(dev, buf, len, err, sizeof(err))) {
		if (!err[0])
			abort(); /* a refusal always says why */
	} else {
		uint64_t l2 = want;

		if (m->save(dev, again, &l2, err, sizeof(err)) ||
		    m->restore(dev, again, l2, err, sizeof(err)))
			abort();
	}
	free(buf);
	free(again);
}

static void fuzz_state_file(const uint8_t *data, size_t size)
{
	static const size_t sizes[] = {0, 1, 8, 16, 48, 56, 72, 120, 1024};
	struct snap_mem_trailer t;
	struct snap_reader r;
	uint8_t out[1024];
	char err[256];

	if (snap_parse(data, size, &r, err, sizeof(err))) {
		if (!err[0])
			abort(); /* a refusal always says why */
		return;
	}
	/* memory.bin's trailer against the header: the file's last 64 bytes stand for one */
	memset(&t, 0, sizeof(t));
	memcpy(&t, data + size - (size < sizeof(t) ? size : sizeof(t)),
	       size < sizeof(t) ? size : sizeof(t));
	err[0] = 0;
	if (snap_mem_trailer_check(&t, &r.h, err, sizeof(err)) && !err[0])
		abort();
	for (unsigned i = 0; i < r.n; i++) {
		const struct snap_ref *s = snap_find(&r, r.sect[i].type, r.sect[i].index);

		if (!s || s->data < data || s->data + s->len > data + size)
			abort();
		/* every section of a fixed size has it, once parsed */
		if (snap_type_len(s->type) && s->len != snap_type_len(s->type))
			abort();
		for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
			snap_get(&r, s->type, s->index, out, sizes[k], err, sizeof(err));
	}
	snap_reader_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = {data, size};
	unsigned sel;

	if (!rng)
		setup();
	if (!size)
		return 0;
	sel = (unsigned)fz_take(&in, 1);
	switch (sel % 7) {
	case 0:
		fuzz_state_file(in.p, in.n);
		break;
	case 1: {
		/* the transport's bytes, most often at the size it expects */
		struct pci_dev *d = virtio_rng_pci(rng);
		size_t want = virtio_pci_state_size((struct virtio_pci *)d->priv);
		uint8_t *buf = calloc(1, want + 16);
		size_t len = sel & 0x80 ? (in.n < want + 16 ? in.n : want + 16) : want;
		char err[256];

		memcpy(buf, in.p, in.n < want + 16 ? in.n : want + 16);
		virtio_rng_model.restore(rng, buf, len, err, sizeof(err));
		/* a guest kick on whatever queue state was accepted */
		virtio_pci_bar_write(d->priv, VIRTIO_PCI_NOTIFY_OFF, "\0\0", 2);
		free(buf);
		break;
	}
	case 2: {
		struct serial s;
		struct serial_state st;

		memset(&s, 0, sizeof(s));
		serial_init(&s, -1, NULL, NULL);
		memset(&st, 0, sizeof(st));
		memcpy(&st, in.p, in.n < sizeof(st) ? in.n : sizeof(st));
		if (!serial_restore(&s, &st))
			for (unsigned i = 0; i < 8; i++)
				serial_read(&s, i);
		break;
	}
	case 3: {
		struct legacy l;
		struct legacy_state st;

		legacy_init(&l, NULL, NULL, NULL);
		memset(&st, 0, sizeof(st));
		memcpy(&st, in.p, in.n < sizeof(st) ? in.n : sizeof(st));
		legacy_restore(&l, &st);
		legacy_save(&l, &st);
		if (st.pm1_cnt & (1u << 13))
			abort(); /* a restored VM is never asleep */
		break;
	}
	case 5:
		fuzz_device(&virtio_net_model, net, in.p, in.n, !(sel & 0x80));
		break;
	case 6:
		fuzz_device(&virtio_vsock_model, vsock, in.p, in.n, !(sel & 0x80));
		break;
	default: {
		struct ioapic io;
		struct ioapic_state st;

		ioapic_init(&io, fake_msi, NULL);
		memset(&st, 0, sizeof(st));
		memcpy(&st, in.p, in.n < sizeof(st) ? in.n : sizeof(st));
		if (!ioapic_restore(&io, &st))
			for (unsigned pin = 0; pin < IOAPIC_PINS; pin++)
				ioapic_set_irq(&io, pin, pin & 1);
		break;
	}
	}
	return 0;
}
