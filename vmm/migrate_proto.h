/* Live migration's wire format (docs/snapshot.md, "Live migration"): typed frames over a Unix
 * stream socket, each a fixed header and a payload whose length is checked against its type's
 * limit before a byte of it is read, and an order the receiver enforces. Pure bytes, no KVM or
 * sockets: the unit tests and the fuzz target drive it directly. */
#ifndef LVMM_MIGRATE_PROTO_H
#define LVMM_MIGRATE_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MIG_MAGIC      0x474d564cu /* "LVMG" little-endian */
#define MIG_VERSION    1u
#define MIG_PAGE       4096u
#define MIG_MAX_CONFIG (1u << 20)   /* the config JSON, as vm.restore reads it */
#define MIG_MAX_PAGES  (1u << 20)   /* one MEMORY frame's page bytes */
#define MIG_MAX_STATE  (256u << 20) /* state.bin, as SNAP_MAX_FILE */
#define MIG_MAX_ERROR  512u	    /* an ERROR frame's text */
#define MIG_MAX_MEMORY (1ull << 40) /* RAM a HELLO may announce */

/* Frame types; the sender (source) sends HELLO .. STATE and COMMIT, the receiver READY, DONE
 * and ERROR (either side may send ERROR, which ends the migration). */
enum mig_type {
	MIG_HELLO = 1, /* struct mig_hello */
	MIG_CONFIG,    /* the VM's config JSON (vm.create's syntax) */
	MIG_MEMORY,    /* u64 RAM offset, then page bytes (a multiple of MIG_PAGE) */
	MIG_MEMFD,     /* struct mig_memfd, the RAM memfd in SCM_RIGHTS (local migration) */
	MIG_STATE,     /* state.bin bytes: the source is paused, no memory follows */
	MIG_READY,     /* empty: the destination restored everything, paused */
	MIG_COMMIT,    /* empty: the source will not resume; the destination takes over */
	MIG_DONE,      /* empty: the destination took over */
	MIG_ERROR,     /* text: why the migration stops */
	MIG_FDS,       /* struct mig_fd, one host fd of a device in SCM_RIGHTS (after CONFIG) */
	MIG_NTYPES
};

/* Every frame starts with this, little-endian as the host (x86-64 only). */
struct mig_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t flags; /* 0 */
	uint32_t pad;	/* 0 */
	uint64_t len;	/* payload bytes after the header */
};
_Static_assert(sizeof(struct mig_hdr) == 24, "migration header layout");

struct mig_hello {
	uint64_t memory; /* guest RAM bytes */
	uint32_t ncpus;
	uint32_t local;	  /* 1: the RAM comes as a memfd, no MEMORY frames */
	uint32_t running; /* 1: the destination resumes the VM once it took over */
	uint32_t pad;
	uint64_t reserved;
};
_Static_assert(sizeof(struct mig_hello) == 32, "migration hello layout");

struct mig_memfd {
	uint64_t size; /* the memfd's size: the guest's RAM */
};

/* A device's host end handed over as it is (a tap queue, a listening socket), so that the
 * destination takes it without opening it again: fd index of count for device id. */
#define MIG_MAX_DEV_FDS 8u  /* fds one device hands over */
#define MIG_MAX_FDS	64u /* FDS frames one migration carries */
struct mig_fd {
	char id[64]; /* the device's id, NUL-terminated */
	uint32_t index, count;
};
_Static_assert(sizeof(struct mig_fd) == 72, "migration fd record layout");

const char *mig_type_name(uint32_t type);
/* The header of a frame: its magic, version, known type, zero flags, a length within its type's
 * limit (exact for fixed-size payloads). 0, or -EPROTO with err naming what is wrong. */
int mig_check_hdr(const struct mig_hdr *h, char *err, unsigned errlen);
void mig_make_hdr(struct mig_hdr *h, uint32_t type, uint64_t len);

/* The receiver's view of the sequence: HELLO, CONFIG, then MEMORY frames (or one MEMFD for a
 * local migration) and FDS frames in any order, STATE; after it answered READY, COMMIT. */
enum mig_rx_phase { MIG_RX_HELLO, MIG_RX_CONFIG, MIG_RX_MEMORY, MIG_RX_COMMIT, MIG_RX_END };

struct mig_rx {
	enum mig_rx_phase phase;
	struct mig_hello hello;
	uint64_t memory_frames, memory_bytes;
	unsigned fds;
	bool got_memfd;
};

void mig_rx_init(struct mig_rx *rx);
/* Whether a frame of type t may come now (a checked header); 0 or -EPROTO with err. */
int mig_rx_expect(const struct mig_rx *rx, uint32_t type, char *err, unsigned errlen);
/* Takes a frame's payload (len bytes, already checked against the header) and advances: HELLO
 * checked (RAM size, vCPUs, local flag), MEMORY's offset and page run checked against the
 * announced RAM (*off and *pages set, *npages bytes), MEMFD's size equal to the RAM, FDS's
 * record (an id, index < count <= MIG_MAX_DEV_FDS, at most MIG_MAX_FDS in all); which device
 * takes it and whether the fd is what its config names is the devices' check. */
int mig_rx_frame(struct mig_rx *rx, uint32_t type, const uint8_t *payload, uint64_t len,
		 uint64_t *off, const uint8_t **pages, uint64_t *npages, char *err,
		 unsigned errlen);

#endif
