/* PCI platform: one bus behind a host bridge at 00:00.0, config access by CF8/CFC and ECAM, BAR
 * allocation and guest re-programming, MSI-X tables whose writes program interrupt routes. */
#ifndef LVMM_PCI_H
#define LVMM_PCI_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "bus.h"

#define PCI_MAX_DEVS 32
#define PCI_NUM_BARS 6
/* d->bar[PCI_ROM_BAR] is the expansion ROM (config 0x30): PCI_BAR_SLOTS decoders in all */
#define PCI_ROM_BAR	 6
#define PCI_BAR_SLOTS	 7
#define PCI_CFG_SIZE	 256 /* pci_dev.cfg; extended space: cfg_read/cfg_write */
#define PCI_CFG_EXT_SIZE 4096

/* A guest can repeat a failing action at will: counts it in *n and says whether to log this one
 * (the 1st..8th, then powers of two). */
static inline bool pci_log_due(uint64_t *n)
{
	++*n;
	return *n <= 8 || !(*n & (*n - 1));
}

/* Config space offsets (PCI Local Bus 3.0) */
#define PCI_VENDOR_ID		    0x00
#define PCI_DEVICE_ID		    0x02
#define PCI_COMMAND		    0x04
#define PCI_COMMAND_IO		    0x1
#define PCI_COMMAND_MEMORY	    0x2
#define PCI_COMMAND_MASTER	    0x4
#define PCI_COMMAND_INTX_DISABLE    0x400
#define PCI_STATUS		    0x06
#define PCI_STATUS_INTERRUPT	    0x08
#define PCI_STATUS_CAP_LIST	    0x10
#define PCI_REVISION_ID		    0x08
#define PCI_CLASS_PROG		    0x09
#define PCI_HEADER_TYPE		    0x0e
#define PCI_BAR0		    0x10
#define PCI_BAR_MEM_TYPE_64	    0x4
#define PCI_BAR_MEM_PREFETCH	    0x8
#define PCI_SUBSYSTEM_VENDOR_ID	    0x2c
#define PCI_SUBSYSTEM_ID	    0x2e
#define PCI_ROM_ADDRESS		    0x30
#define PCI_ROM_ADDRESS_ENABLE	    0x1
#define PCI_CAPABILITY_LIST	    0x34
#define PCI_INTERRUPT_LINE	    0x3c
#define PCI_INTERRUPT_PIN	    0x3d
#define PCI_CAP_ID_PM		    0x01
#define PCI_PM_CTRL		    4 /* PMCSR: power state in bits 0-1 */
#define PCI_CAP_ID_MSI		    0x05
#define PCI_CAP_ID_MSIX		    0x11
#define PCI_CAP_ID_VNDR		    0x09
#define PCI_CAP_ID_EXP		    0x10
#define PCI_EXP_FLAGS		    2	/* within the capability */
#define PCI_EXP_TYPE_RC_END	    0x9 /* Root Complex Integrated Endpoint */
#define PCI_EXP_DEVCAP		    4
#define PCI_EXP_DEVCAP_FLR	    0x10000000
#define PCI_EXP_DEVCTL		    8
#define PCI_EXP_DEVCTL_BCR_FLR	    0x8000
#define PCI_EXP_CAP_SIZE	    0x3c /* version 2 */
#define PCI_MSIX_FLAGS		    2	 /* within the capability */
#define PCI_MSIX_FLAGS_ENABLE	    0x8000
#define PCI_MSIX_FLAGS_MASKALL	    0x4000
#define PCI_MSIX_FLAGS_QSIZE	    0x07ff
#define PCI_MSIX_TABLE		    4 /* within the capability: BIR (bits 2:0) and offset */
#define PCI_MSIX_PBA		    8
#define PCI_MSIX_BIR		    0x7
#define PCI_MSI_FLAGS		    2 /* within the capability */
#define PCI_MSI_FLAGS_ENABLE	    0x0001
#define PCI_MSI_FLAGS_QMASK	    0x000e /* vectors offered, log2 */
#define PCI_MSI_FLAGS_QSIZE	    0x0070 /* vectors enabled, log2 */
#define PCI_MSI_FLAGS_64BIT	    0x0080
#define PCI_MSI_FLAGS_MASKBIT	    0x0100
#define PCI_MSI_MAX_VECTORS	    32
#define PCI_MSIX_ENTRY_SIZE	    16
#define PCI_MSIX_ENTRY_CTRL_MASKBIT 0x1

/* Extended capabilities (from PCI_CFG_SIZE): a header dword of id (15:0), version (19:16) and
 * the next one's offset (31:20, dword aligned, 0 ends the list). */
#define PCI_EXT_CAP_NEXT_SH	20
#define PCI_EXT_CAP_ID_ACS	0x0d /* Access Control Services */
#define PCI_EXT_CAP_ID_ATS	0x0f /* Address Translation Services */
#define PCI_EXT_CAP_ID_SRIOV	0x10
#define PCI_EXT_CAP_ID_MRIOV	0x11
#define PCI_EXT_CAP_ID_MCAST	0x12 /* Multicast */
#define PCI_EXT_CAP_ID_PRI	0x13 /* Page Request Interface */
#define PCI_EXT_CAP_ID_REBAR	0x15 /* Resizable BAR */
#define PCI_EXT_CAP_ID_PASID	0x1b
#define PCI_EXT_CAP_ID_VF_REBAR 0x24

/* What the PCI layer needs from the VM; devices.c wires these to vm.h, tests to fakes. */
struct pci_platform_ops {
	void *opaque;
	int (*alloc_gsi)(void *opaque);
	/* Gives a GSI of a departing function back (may be NULL: the GSI is then lost). */
	int (*free_gsi)(void *opaque, unsigned gsi);
	int (*set_msi_route)(void *opaque, unsigned gsi, uint64_t addr, uint32_t data, bool masked);
	int (*irqfd)(void *opaque, unsigned gsi, int efd, bool assign);
	/* INTx (both may be NULL: no legacy interrupts). The level of IOAPIC input gsi; and a KVM
	 * irqfd on it whose resample_fd KVM signals at the guest's EOI (the in-kernel IOAPIC), or
	 * -EOPNOTSUPP where the IOAPIC is lvmm's (split irqchip): there the function raises its
	 * line through pci_intx_set() and hears the EOI through pci_bus_intx_eoi(). */
	int (*intx_line)(void *opaque, unsigned gsi, bool level);
	int (*intx_irqfd)(void *opaque, unsigned gsi, int efd, int resample_fd, bool assign);
	/* Host memory BARs (CMB): map/unmap in the guest address space; may be NULL. */
	int (*map_host)(void *opaque, uint64_t gpa, uint64_t size, void *host);
	int (*unmap_host)(void *opaque, uint64_t gpa);
	/* Fuzzing only: no remap worker; pci_bus_remap_flush() applies queued remaps itself. */
	bool remap_inline;
};

struct pci_dev;

struct pci_bar {
	uint64_t size; /* power of two >= 4 KiB; 0 = not implemented */
	bool is64, prefetch;
	uint64_t addr; /* as programmed in config space */
	bool mapped, mapped_host;
	bool parked; /* moved(~0) told ahead of a decode-off write: bars_update() redoes it */
	uint64_t mapped_addr;
	uint64_t placed;	   /* where pci_bus_add put it: freed on exit, 0 = none */
	const struct bus_ops *ops; /* MMIO handler (offset relative to the BAR) */
	void *opaque;
	void *host; /* host-memory BAR instead of MMIO dispatch (when map_host exists) */
	/* Told where the BAR now decodes, ~0 when it stopped decoding. */
	void (*moved)(struct pci_dev *d, unsigned bar, uint64_t gpa);
};

struct pci_msix_entry {
	uint32_t addr_lo, addr_hi, data, ctrl;
};

struct pci_msix {
	unsigned nvec;
	unsigned bar, pba_bar; /* where the table and the PBA live */
	uint32_t table_off, pba_off;
	uint8_t cap; /* config offset of the capability, 0 = none */
	bool enabled, maskall;
	struct pci_msix_entry *table;
	uint64_t *pba;
	int *gsi;
	int *efd;
	uint64_t *live; /* bitmap: efd[v] is KVM's irqfd now (vector unmasked) */
	bool master;	/* bus mastering on: a message may be written */
	uint64_t fired, pended;
};

/* MSI (a passed-through function's own capability): emulated, each vector a GSI and eventfd as
 * MSI-X's are. */
struct pci_msi {
	uint8_t cap;   /* config offset, 0 = none */
	unsigned nvec; /* offered (1..32) */
	bool is64, maskable;
	unsigned enabled; /* vectors enabled now, 0 = off */
	bool master;
	int gsi[PCI_MSI_MAX_VECTORS], efd[PCI_MSI_MAX_VECTORS];
	uint64_t live[1], pending[1];
	uint64_t fired, pended;
};

struct pci_bus;

struct pci_dev {
	struct pci_bus *bus;
	char name[32];
	uint8_t devfn;
	pthread_mutex_t lock;
	uint8_t cfg[PCI_CFG_SIZE];
	uint8_t wmask[PCI_CFG_SIZE];
	uint8_t next_cap;
	struct pci_bar bar[PCI_BAR_SLOTS];
	struct pci_msix msix;
	struct pci_msi msi;
	void *priv;
	/* Function Level Reset (pci_dev_add_flr): the PCIe capability's offset, the config
	 * values a reset restores (taken before the BARs are placed), the device's own reset. */
	uint8_t pcie_cap;
	uint8_t cfg_reset[PCI_CFG_SIZE];
	void (*flr)(struct pci_dev *d);
	uint64_t flrs;
	/* Optional, a passed-through function (devices/vfio): config reads get the emulated bytes
	 * from cfg, then cfg_read() merges the device's own over those it does not emulate; writes
	 * apply to cfg (write masks, BARs, MSI-X) and then go to cfg_write(). Extended config
	 * (PCI_CFG_SIZE up to PCI_CFG_EXT_SIZE) is theirs alone: reads start from zeroes. Both
	 * run without d->lock, reg + len never past PCI_CFG_SIZE or past PCI_CFG_EXT_SIZE.
	 * msix_enable() is told when the guest turns MSI-X on or off (d->lock held). */
	void (*cfg_read)(struct pci_dev *d, unsigned reg, void *data, unsigned len);
	void (*cfg_write)(struct pci_dev *d, unsigned reg, const void *data, unsigned len);
	void (*msix_enable)(struct pci_dev *d, bool on);
	/* Optional: the guest enabled nvec MSI vectors (0: MSI off), d->lock held. */
	void (*msi_enable)(struct pci_dev *d, unsigned nvec);
	/* INTx: the pin (config 0x3d, pci_dev_set_intx_pin) reaches IOAPIC input intx_gsi once on
	 * the bus (0: none). intx_asserted is the function's own line; the bus drives the input
	 * (intx_high) while it is asserted, the command register's INTx Disable is clear and
	 * neither MSI nor MSI-X is on. d->lock. */
	uint8_t intx_gsi;
	bool intx_asserted, intx_high;
	/* Optional: the guest's EOI for intx_gsi (lvmm's own IOAPIC only), without d->lock. */
	void (*intx_eoi)(struct pci_dev *d);
	/* Optional: the bus gated the line on or off (INTx Disable, MSI, MSI-X), d->lock held. */
	void (*intx_gate)(struct pci_dev *d, bool open);
	/* Optional: pin-based interrupts on (neither MSI nor MSI-X on) or off, d->lock held. INTx
	 * Disable does not enter: the function keeps working out its INTx condition while the bit
	 * is set (Interrupt Status shows it, as PCI asks), and the line follows when it clears. */
	void (*intx_mode)(struct pci_dev *d, bool pin_based);
};

struct pci_bus {
	struct pci_platform_ops ops;
	struct bus *pio, *mmio;
	pthread_mutex_t lock;
	uint32_t cf8;
	struct pci_dev *dev[PCI_MAX_DEVS];
	uint64_t mmio64_next, mmio32_next;
	/* The 64-bit window's size now, and what it may grow to while BARs are placed before the
	 * guest sees it (pci_bus_mmio64_seal() ends that): large prefetchable BARs (a GPU's 16-256
	 * GiB BAR1) make it as large as the functions present need. */
	uint64_t mmio64_size, mmio64_max;
	/* Window space of removed functions (pci_dev_exit), taken again by an exact size. */
	struct {
		uint64_t addr, size;
	} bar_free[32];
	unsigned nbar_free;
	struct pci_dev host_bridge;
	bool pio_registered, ecam_registered;
	/* INTx: functions driving each IOAPIC input kept for PCI (wired OR), under intx_lock,
	 * taken inside d->lock. */
	pthread_mutex_t intx_lock;
	unsigned intx_users[4];
	/* Every BAR (re)mapping runs under remap_lock, from either access path. ECAM writes arrive
	 * with the MMIO bus lock held, so they only mark the slot in remap_want (b->lock) and one
	 * worker per bus applies it: a flood of writes coalesces into one remap per device. */
	pthread_mutex_t remap_lock;
	pthread_cond_t remap_cond;
	pthread_t remap_thread;
	bool remap_started, remap_stop;
	uint32_t remap_want;		/* slots whose BARs may have moved (b->lock) */
	struct pci_dev *remap_dev;	/* the device being remapped by the worker now (b->lock) */
	uint64_t remaps, remap_refused; /* counters; refusals are logged sparsely */
};

/* Creates the bus and host bridge, registers CF8/CFC on pio and ECAM on mmio. */
int pci_bus_init(struct pci_bus *b, const struct pci_platform_ops *ops, struct bus *pio,
		 struct bus *mmio, char *err, unsigned errlen);
void pci_bus_exit(struct pci_bus *b);

/* Device set-up, before pci_bus_add(). */
void pci_dev_init(struct pci_dev *d, const char *name, uint16_t vendor, uint16_t device,
		  uint32_t class_code, uint16_t subsys_vendor, uint16_t subsys);
/* bar PCI_ROM_BAR: the expansion ROM, 32-bit and not prefetchable, placed in the 32-bit window
 * like a BAR; it decodes only while the guest sets its enable bit. */
int pci_dev_add_bar(struct pci_dev *d, unsigned bar, uint64_t size, bool is64, bool prefetch,
		    const struct bus_ops *ops, void *opaque, void *host);
/* Appends a capability (cap[0] = id; cap[1] is filled in); returns its config offset or < 0. */
int pci_dev_add_cap(struct pci_dev *d, const void *cap, unsigned len);
/* MSI-X with nvec vectors; table and PBA in BAR bar (which this call creates, 64-bit). */
int pci_dev_add_msix(struct pci_dev *d, unsigned nvec, unsigned bar, char *err, unsigned errlen);
/* MSI-X of a passed-through function: its own capability, already in cfg at offset cap, says
 * how many vectors and where the table and PBA lie in its BARs; the BARs' handlers hand those
 * accesses to pci_msix_access(). */
int pci_dev_add_msix_at(struct pci_dev *d, uint8_t cap, char *err, unsigned errlen);
/* MSI of a passed-through function: its own capability, already in cfg at offset cap (and
 * linked), emulated: enable, vectors enabled, address, data and mask bits are the guest's,
 * each enabled vector routed like an MSI-X one; pending bits read back. */
int pci_dev_add_msi_at(struct pci_dev *d, uint8_t cap, char *err, unsigned errlen);
/* The MSI capability's length in bytes from its Message Control word. */
unsigned pci_msi_cap_len(uint16_t flags);
/* A guest access at off inside BAR bar: served from the emulated MSI-X table or PBA (true), or
 * not theirs (false). len 4 or 8, aligned; anything else inside them reads 0 and is dropped. */
bool pci_msix_access(struct pci_dev *d, unsigned bar, uint64_t off, void *data, unsigned len,
		     bool write);
/* A PCI Express capability (integrated endpoint) advertising Function Level Reset. A write of
 * Initiate FLR resets the function: config space to its reset values (command 0, BARs
 * unassigned, MSI-X off, every vector masked, nothing pending), then flr(d) resets the device
 * behind it, called without d->lock. Returns the capability's offset or < 0. */
int pci_dev_add_flr(struct pci_dev *d, void (*flr)(struct pci_dev *d));
/* The 64-bit window may grow up to max bytes (from LAYOUT_MMIO64_START) until sealed; seal
 * returns its size then, which the firmware tables describe. Hot-added functions fit the
 * sealed window or are refused. */
void pci_bus_mmio64_limit(struct pci_bus *b, uint64_t max);
uint64_t pci_bus_mmio64_seal(struct pci_bus *b);
/* Places the device on the bus at the next free slot, assigns and maps its BARs. */
int pci_bus_add(struct pci_bus *b, struct pci_dev *d, char *err, unsigned errlen);
void pci_dev_exit(struct pci_dev *d);

/* Waits until every ECAM-triggered remap queued so far has been applied (with remap_inline:
 * applies them, on the caller's thread, which must not hold the MMIO bus lock). */
void pci_bus_remap_flush(struct pci_bus *b);

/* Whether the guest left bus mastering on: a device may DMA only then. */
bool pci_dev_bus_master(struct pci_dev *d);

/* INTx pin 1-4 (A-D) of a function before pci_bus_add(), or 0 for none. */
void pci_dev_set_intx_pin(struct pci_dev *d, unsigned pin);
/* The function asserts (or deasserts) its INTx pin, any thread: the Interrupt Status bit
 * follows, and the IOAPIC input while the line is not gated off. */
void pci_intx_set(struct pci_dev *d, bool asserted);
/* The same with d->lock held (a device's callback of the bus, or its own locked section). */
void pci_intx_set_locked(struct pci_dev *d, bool asserted);
/* Whether the line reaches the IOAPIC now (asserted and not gated). */
bool pci_intx_high(struct pci_dev *d);
/* The guest's EOI for IOAPIC input gsi (lvmm's own IOAPIC): told to the functions on it. */
void pci_bus_intx_eoi(struct pci_bus *b, unsigned gsi);
/* A KVM irqfd with resample on the function's input (pci_platform_ops.intx_irqfd): -ENODEV
 * without a pin on a bus, -EOPNOTSUPP where the platform has none (lvmm's IOAPIC). */
int pci_intx_irqfd(struct pci_dev *d, int efd, int resample_fd, bool assign);

/* Raises MSI-X vector v (any thread): signals its irqfd, or sets the PBA bit while masked or
 * while bus mastering is off (the message write cannot leave the device then). */
void pci_msix_notify(struct pci_dev *d, unsigned v);

/* Snapshots: a function's guest-visible PCI state (config space, MSI-X table and PBA) as bytes,
 * pci_dev_state_size() of them; restore applies saved bytes to the same function freshly placed
 * on its bus, through the same checks as guest writes (read-only bits stay, BARs decode where
 * the saved config says). The buffer is untrusted: 0, or -EINVAL with a message. */
size_t pci_dev_state_size(const struct pci_dev *d);
void pci_dev_save(struct pci_dev *d, void *buf);
int pci_dev_restore(struct pci_dev *d, const void *buf, size_t len, char *err, unsigned errlen);
/* Places d's BARs where its config space says again: after every function of a restore is
 * back, a BAR that overlapped another's not yet restored window decodes now. */
void pci_dev_bars_refresh(struct pci_dev *d);

/* Config access as the CF8/CFC and ECAM handlers do it (tests use these directly). */
void pci_cfg_read(struct pci_bus *b, unsigned busno, unsigned devfn, unsigned reg, void *data,
		  unsigned len);
void pci_cfg_write(struct pci_bus *b, unsigned busno, unsigned devfn, unsigned reg,
		   const void *data, unsigned len);

#endif
