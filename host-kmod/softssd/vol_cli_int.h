/* What vol_cli.c (the command line) and vol_copy.c (import and export) share: one invocation of
 * `lvmm ssd vol` and its buffers. Private to those two files. */
#ifndef SOFTSSD_VOL_CLI_INT_H
#define SOFTSSD_VOL_CLI_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "lightiov/uapi.h"

#define VOLCLI_CHUNK LIO_MDTS_BYTES /* one NVMe command online, one pread/pwrite offline */
#define VOLCLI_QD    8		    /* commands in flight online (the queue pair has 16) */

struct lio_client;
struct lio_drv;
struct ssd_volumes;

/* One buffer of the copy and the command using it. */
struct volcli_slot {
	void *buf;
	uint64_t gpa; /* online: buf in the DMA window */
	uint64_t lba; /* window-relative */
	uint32_t nlb;
	int cid;
	bool busy, write;
};

/* One invocation: the daemon (c) or the backing (fd, v), and the volume being moved. */
struct volcli {
	const char *cmd, *ssd, *vol, *backing;
	struct lio_client *c;
	struct lio_drv *drv;
	int fd;
	struct ssd_volumes *v;
	uint32_t lba_shift;
	struct lio_vol_attach a;
	bool attached;
	struct volcli_slot slot[VOLCLI_QD];
	unsigned nr_slots; /* VOLCLI_QD online, 1 offline (its buffer is malloc'd) */
	int out;	   /* export: the file, written where each read lands */
	const char *file;
	bool sparse;
	char err[LIO_ERR_MAX + 128];
};

/* Prints "lvmm: MSG" and returns 1 (refused or failed). */
int volcli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* FILE into the volume x->vol, or the volume into FILE: 0, or 1 with the message printed. */
int volcli_import(struct volcli *x, const char *file);
int volcli_export(struct volcli *x, const char *file);

#endif
