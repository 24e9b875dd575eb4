/* The snapshot state file (docs/snapshot.md): a header and a list of typed sections, built in
 * memory by the writer and checked whole by the parser before anything is read from it. Pure
 * bytes, no KVM: the unit tests and the fuzz target drive it directly. */
#ifndef LVMM_SNAPSHOT_FMT_H
#define LVMM_SNAPSHOT_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SNAP_MAGIC	  "LVMMSNAP"
#define SNAP_VERSION	  2u /* 1: before the snapshot id and the TSC section */
#define SNAP_ID_LEN	  16u
#define SNAP_MAX_CPUS	  64u
#define SNAP_MAX_SECTIONS 4096u
#define SNAP_MAX_SECTION  (16u << 20) /* one section's bytes */
#define SNAP_MAX_FILE	  (256u << 20)

/* Section types. The vCPU ones carry the vCPU index; a device's carries its ordinal. */
enum snap_type {
	SNAP_VM_CLOCK = 1,     /* struct kvm_clock_data */
	SNAP_VM_PIC_MASTER,    /* struct kvm_irqchip (in-kernel irqchip) */
	SNAP_VM_PIC_SLAVE,     /* struct kvm_irqchip */
	SNAP_VM_IOAPIC_KVM,    /* struct kvm_irqchip */
	SNAP_VM_PIT,	       /* struct kvm_pit_state2 */
	SNAP_VM_IOAPIC_USER,   /* struct ioapic_state (split irqchip) */
	SNAP_VM_SERIAL,	       /* struct serial_state */
	SNAP_VM_LEGACY,	       /* struct legacy_state */
	SNAP_VM_TSC,	       /* struct snap_tsc */
	SNAP_VCPU_REGS = 0x10, /* struct kvm_regs */
	SNAP_VCPU_SREGS,       /* struct kvm_sregs */
	SNAP_VCPU_FPU,	       /* struct kvm_fpu */
	SNAP_VCPU_XSAVE,       /* struct kvm_xsave (when the host has it) */
	SNAP_VCPU_LAPIC,       /* struct kvm_lapic_state */
	SNAP_VCPU_MSRS,	       /* n x struct kvm_msr_entry */
	SNAP_VCPU_MP_STATE,    /* struct kvm_mp_state */
	SNAP_VCPU_EVENTS,      /* struct kvm_vcpu_events */
	SNAP_VCPU_XCRS,	       /* struct kvm_xcrs (when the host has it) */
	SNAP_VCPU_DEBUGREGS,   /* struct kvm_debugregs */
	SNAP_VCPU_LAST = SNAP_VCPU_DEBUGREGS,
	SNAP_DEVICE = 0x40, /* struct snap_dev_head, then the model's own bytes */
};

/* At offset 0 of the file, little-endian as the host (x86-64 only). */
struct snap_header {
	char magic[8];
	uint32_t version;
	uint32_t ncpus;
	uint64_t memory;      /* guest RAM bytes: memory.bin's size */
	uint64_t config_hash; /* FNV-1a of config.json's bytes */
	uint32_t nsections;
	uint32_t flags; /* 0 */
	uint64_t payload_len;
	uint64_t payload_hash;	 /* FNV-1a of the bytes after the header */
	uint8_t id[SNAP_ID_LEN]; /* random, per snapshot: memory.bin's trailer repeats it */
};
_Static_assert(sizeof(struct snap_header) == 72, "snapshot header layout");

/* The exact length of every section of a fixed size. The KVM structures' are their x86-64
 * sizes, which vm_snapshot.c (where the KVM headers are) asserts at build time, as it does for
 * lvmm's own: a header or struct change that would change the format fails the build. */
#define SNAP_LEN_CLOCK	   48u	 /* struct kvm_clock_data */
#define SNAP_LEN_IRQCHIP   520u	 /* struct kvm_irqchip */
#define SNAP_LEN_PIT	   112u	 /* struct kvm_pit_state2 */
#define SNAP_LEN_IOAPIC	   224u	 /* struct ioapic_state */
#define SNAP_LEN_SERIAL	   76u	 /* struct serial_state */
#define SNAP_LEN_LEGACY	   140u	 /* struct legacy_state */
#define SNAP_LEN_TSC	   8u	 /* struct snap_tsc */
#define SNAP_LEN_REGS	   144u	 /* struct kvm_regs */
#define SNAP_LEN_SREGS	   312u	 /* struct kvm_sregs */
#define SNAP_LEN_FPU	   416u	 /* struct kvm_fpu */
#define SNAP_LEN_XSAVE	   4096u /* struct kvm_xsave */
#define SNAP_LEN_LAPIC	   1024u /* struct kvm_lapic_state */
#define SNAP_LEN_MSR	   16u	 /* one struct kvm_msr_entry: the MSR section is n of them */
#define SNAP_LEN_MP_STATE  4u	 /* struct kvm_mp_state */
#define SNAP_LEN_EVENTS	   64u	 /* struct kvm_vcpu_events */
#define SNAP_LEN_XCRS	   392u	 /* struct kvm_xcrs */
#define SNAP_LEN_DEBUGREGS 128u	 /* struct kvm_debugregs */
#define SNAP_MAX_MSRS	   1024u /* entries of one vCPU's MSR section */

/* The guest's TSC rate (KVM_GET_TSC_KHZ) when saved; 0 when the host could not say. */
struct snap_tsc {
	uint32_t khz;
	uint32_t flags; /* 0 */
};
_Static_assert(sizeof(struct snap_tsc) == SNAP_LEN_TSC, "snapshot TSC section layout");

/* memory.bin is the RAM, then this: the state file's snapshot id ties the two together, so a
 * memory.bin of another snapshot (of the same VM, of the same size) is refused. */
#define SNAP_MEM_MAGIC "LVMMMEM1"
struct snap_mem_trailer {
	char magic[8];
	uint64_t memory; /* RAM bytes before the trailer */
	uint8_t id[SNAP_ID_LEN];
	uint64_t reserved[4]; /* 0 */
};
_Static_assert(sizeof(struct snap_mem_trailer) == 64, "memory.bin trailer layout");

void snap_mem_trailer_make(struct snap_mem_trailer *t, uint64_t memory,
			   const uint8_t id[SNAP_ID_LEN]);
/* Checks a trailer read from memory.bin against the state file's header: 0, or -EINVAL with a
 * message naming what differs. */
int snap_mem_trailer_check(const struct snap_mem_trailer *t, const struct snap_header *h, char *err,
			   unsigned errlen);
/* The exact length a section of type must have; 0 for one of variable length (MSRs, device). */
uint64_t snap_type_len(uint32_t type);

/* Each section: this, then len bytes, then zeroes up to a multiple of 8. */
struct snap_section {
	uint32_t type;
	uint32_t index;
	uint64_t len;
};
_Static_assert(sizeof(struct snap_section) == 16, "snapshot section layout");

/* A device section starts with its id and model name (NUL-padded) and PCI slot on bus 0. */
struct snap_dev_head {
	char id[64];
	char model[32];
	uint32_t slot, pad;
};
_Static_assert(sizeof(struct snap_dev_head) == 104, "snapshot device head layout");

uint64_t snap_hash(const void *buf, size_t len);
/* Whether the n bytes at p are all zero: the pages a snapshot or a migration leaves out. */
bool snap_all_zero(const void *p, size_t n);

struct snap_writer {
	uint8_t *buf;
	size_t len, cap;
	unsigned nsections;
	int err;		 /* first failure (-ENOMEM, -E2BIG); later puts do nothing */
	uint8_t id[SNAP_ID_LEN]; /* the snapshot id snap_finish writes (zero from init) */
};

void snap_writer_init(struct snap_writer *w);
void snap_put(struct snap_writer *w, uint32_t type, uint32_t index, const void *data, size_t len);
/* A device section: the head, then len bytes of the model's state. */
void snap_put_device(struct snap_writer *w, uint32_t index, const char *id, const char *model,
		     uint32_t slot, const void *data, size_t len);
/* Fills the header; 0, or the first error of a put. The file is w->buf[0..w->len). */
int snap_finish(struct snap_writer *w, uint32_t ncpus, uint64_t memory, uint64_t config_hash);
void snap_writer_free(struct snap_writer *w);

struct snap_ref {
	uint32_t type, index;
	const uint8_t *data;
	uint64_t len;
};

struct snap_reader {
	struct snap_header h;
	unsigned n;
	struct snap_ref *sect;
};

/* Checks the whole file: magic, version, sizes, hash, every section inside the file and of its
 * type's length, no section twice, vCPU sections below ncpus; 0, or a negative errno with a message
 * naming what is wrong. buf must outlive the reader. */
int snap_parse(const void *buf, size_t len, struct snap_reader *r, char *err, unsigned errlen);
void snap_reader_free(struct snap_reader *r);
/* The section (type, index), or NULL. */
const struct snap_ref *snap_find(const struct snap_reader *r, uint32_t type, uint32_t index);
/* Copies section (type, index) into dst when it has exactly size bytes: 0, -ENOENT when it is
 * missing, -EINVAL when its size differs (err names the section either way). */
int snap_get(const struct snap_reader *r, uint32_t type, uint32_t index, void *dst, size_t size,
	     char *err, unsigned errlen);
const char *snap_type_name(uint32_t type);

#endif
