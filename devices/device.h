/* The contract between the VMM and a device model. A device gets from the VMM only what a device
 * needs (dev_host: guest memory, KVM eventfds, host memory mapped into the guest, the vCPU count),
 * builds its PCI function with the platform's pci.h, and gives the VMM one dev_model: create from
 * its own configuration type, realize once on the bus, pause/resume, save/restore, counters,
 * destroy. vmm/devices.c keeps the registry of models and the instances of a VM; a device never
 * includes vmm's configuration or VM internals. */
#ifndef LVMM_DEVICE_H
#define LVMM_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "guest_mem.h"
#include "lightiov/counters.h"
#include "pci.h"

struct vfio_device;

/* What the VMM lends a device for its lifetime. */
struct dev_host {
	void *opaque; /* the VM, handed back to every call */
	struct guest_mem *gm;
	unsigned cpus; /* boot vCPUs: devices size queues and vectors by it */
	/* A KVM ioeventfd: a guest write of len bytes at gpa signals fd instead of exiting. */
	int (*ioeventfd)(void *opaque, uint64_t gpa, unsigned len, int fd, bool assign);
	/* Host memory as guest memory at gpa (page aligned), and back. */
	int (*map_host)(void *opaque, uint64_t gpa, uint64_t size, void *host);
	int (*unmap_host)(void *opaque, uint64_t gpa);
	/* The first call of every thread a device starts that touches guest data: confines it
	 * (the VMM's seccomp filter for device I/O). A failure is logged; the thread goes on under
	 * the process filter. */
	int (*io_thread)(char *err, unsigned errlen);
	/* The same for a device thread whose host end is Unix sockets it accepts and connects
	 * (vsock): the device-I/O filter plus those calls. */
	int (*sock_thread)(char *err, unsigned errlen);
	/* Passed-through functions (devices/vfio): PCI function bdf opened in the VM's one VFIO
	 * container, whose IOMMU maps guest RAM at IOVA = GPA (NULL with err: no VFIO here, a
	 * group that is not viable ...), and given back when the device goes. */
	struct vfio_device *(*vfio_open)(void *opaque, const char *bdf, char *err, unsigned errlen);
	void (*vfio_release)(void *opaque, struct vfio_device *d);
};

/* Counters of one device for vm.counters: the device fills these, the API prints them. */
#define DEV_MAX_QUEUES 8 /* per-queue counters reported per device */

/* A backend queue pair's: the session counters of lightiov/counters.h, then its interrupts. */
struct dev_queue_counters {
	uint16_t qid;
	LIO_COUNTERS_SESSION(LIO_COUNTER_FIELD)
	uint64_t irqs;
};

struct dev_counters {
	char id[64];
	uint64_t reads, writes, read_bytes, write_bytes, flushes;
	uint64_t doorbells, mmio_exits, irqs;
	uint64_t wakeups; /* lvmm thread runs for this device (I/O thread or inline) */
	char mode[16];	  /* emulate, passthrough, isolated */
	char ssd[64];	  /* empty for file= */
	char volume[32];
	uint64_t backend_cmds, backend_errors, backend_rejected; /* all queue pairs, also gone */
	unsigned nqueues;     /* bound queue pairs (backend counters in q[]) */
	uint64_t db_switched; /* queue pairs moved to eventfd doorbells (doorbell=auto) */
	/* a network device: frames and bytes toward the guest (rx) and from it (tx), and what
	 * was dropped each way */
	bool net;
	uint64_t rx_frames, rx_bytes, rx_dropped, tx_frames, tx_bytes, tx_dropped;
	struct dev_queue_counters q[DEV_MAX_QUEUES];
};

/* A device model. Optional ops are NULL when the model has nothing to do there. All that
 * return int give 0 or a negative errno with a one-line message in err. */
struct dev_model {
	const char *name;
	/* A device from cfg (the model's own configuration type), id its name, idx its ordinal
	 * among the VM's devices of this model; not yet on a bus. */
	int (*create)(const struct dev_host *h, const void *cfg, const char *id, unsigned idx,
		      void **dev, char *err, unsigned errlen);
	struct pci_dev *(*pci)(void *dev); /* the function to place on the bus */
	/* Optional: once on the bus (BARs placed by the guest later), before the guest runs. */
	int (*realize)(void *dev, char *err, unsigned errlen);
	/* Optional: the VM pauses (vCPUs stopped) or resumes. */
	void (*pause)(void *dev);
	void (*resume)(void *dev);
	/* Optional, for snapshots: the device state as bytes, and back into a created device.
	 * save: *len is buf's room on entry and the bytes written on return; buf NULL asks for
	 * the size. A model without save makes vm.snapshot refuse the VM. restore's bytes come
	 * from a file: untrusted, checked whole before use. */
	int (*save)(void *dev, void *buf, uint64_t *len, char *err, unsigned errlen);
	int (*restore)(void *dev, const void *buf, uint64_t len, char *err, unsigned errlen);
	/* Optional, for live migration of a paused, saved VM: let go of what the destination VMM
	 * must hold alone (a volume one writer may attach), and take it back as saved when the
	 * migration fails before the destination took over. */
	int (*release)(void *dev, char *err, unsigned errlen);
	int (*reclaim)(void *dev, char *err, unsigned errlen);
	/* Optional, for live migration: the host ends the destination takes the device over with
	 * as they are (a tap's queues, a listening socket), so that nothing is opened again by
	 * name (a tap this VMM made would go with its last fd; a socket path is one process's):
	 * up to max fds into fds, their count returned. The device keeps its own; a model with
	 * hand_fds has the destination build the VM late, as release does. */
	unsigned (*hand_fds)(void *dev, int *fds, unsigned max);
#define DEV_MAX_HAND_FDS 8 /* hand_fds's max: a net's tap queues, a socket */
	/* Optional, the destination's side: fd number index of count that the source's device
	 * handed over, into this model's config (cfg, as create takes it) once checked against
	 * what the config names there (the tap, the socket's path). 0: cfg holds fd now (closed
	 * with the config, config_fds_close); else fd stays the caller's. */
	int (*take_fd)(void *cfg, unsigned index, unsigned count, int fd, char *err,
		       unsigned errlen);
	/* Optional, for a model without save: why it cannot be saved, for vm.snapshot's refusal. */
	const char *nosave;
	void (*counters)(void *dev, struct dev_counters *out); /* optional: id filled already */
	void (*destroy)(void *dev);			       /* off the bus, then freed */
};

#endif
