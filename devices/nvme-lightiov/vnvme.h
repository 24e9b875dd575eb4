/* A vNVMe function's configuration, the device's own type: `lvmm run --vnvme` and the API's
 * vm.create / vm.add-vnvme fill it (vmm/config.c), the device model reads it. */
#ifndef LVMM_VNVME_H
#define LVMM_VNVME_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define VNVME_PATH_MAX 4096

enum vnvme_mode { VNVME_EMULATE, VNVME_PASSTHROUGH, VNVME_ISOLATED };
enum vnvme_doorbell { VNVME_DB_AUTO, VNVME_DB_POLL, VNVME_DB_EVENTFD };

struct vnvme_config {
	char id[64];		   /* device id (API remove-device), default "nvme<N>" */
	char path[VNVME_PATH_MAX]; /* file=PATH backing, or empty when ssd is set */
	char ssd[64];		   /* softssd/kmod name (ssd0:10G form), empty for file= */
	char vol[64];		   /* named volume on the ssd */
	uint64_t size;		   /* bytes; 0 = size of the existing file */
	bool readonly;
	char serial[21]; /* NVMe serial number, 20 chars max */
	enum vnvme_mode mode;
	unsigned queues;	      /* I/O queue pairs offered, 1..65535; 0 = one per vCPU */
	enum vnvme_doorbell doorbell; /* ssd modes: polled pages or eventfds; auto = the SSD's */
	/* Set by the VMM from the VM's allowed_dir when the VM is built, never parsed: file= is
	 * then opened by a walk beneath it (no check-then-open window). NULL: no confinement. */
	const char *root;
};

/* The id a vNVMe is known by: its own, or "nvme<idx>" when none was given. */
static inline void vnvme_id(const struct vnvme_config *v, unsigned idx, char *buf, size_t len)
{
	if (v->id[0])
		snprintf(buf, len, "%s", v->id);
	else
		snprintf(buf, len, "nvme%u", idx);
}

#endif
