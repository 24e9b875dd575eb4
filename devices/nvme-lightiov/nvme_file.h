/* File backend of the vNVMe controller: a raw image driven through io_uring from one dedicated
 * I/O thread, which also runs the controller's queue processing when a doorbell wakes it. */
#ifndef LVMM_NVME_FILE_H
#define LVMM_NVME_FILE_H

#include "vnvme.h"
#include "nvme_ctrl.h"

struct nvme_file;

/* Faults LVMM_FAULT_FILE injects into the backend's completions (tests). */
enum nvme_file_fault {
	NVME_FILE_FAULT_NONE,
	NVME_FILE_FAULT_EIO_READ,
	NVME_FILE_FAULT_EIO_WRITE,
	NVME_FILE_FAULT_EIO_FLUSH,
	NVME_FILE_FAULT_ENOSPC,
	NVME_FILE_FAULT_SHORT_WRITE,
	NVME_FILE_FAULT_SHORT_READ,
	NVME_FILE_FAULT_KINDS
};

/* Opens (creating and sizing when absent) cfg->path; *size gets the namespace size in bytes.
 * No thread runs yet. Errors name the device and the file. */
int nvme_file_open(const struct vnvme_config *cfg, struct nvme_file **out, uint64_t *size,
		   char *err, unsigned errlen);
/* Tests and fuzzing: the fault LVMM_FAULT_FILE=KIND@AFTER would inject, set before
 * nvme_file_start (the I/O thread owns it after). */
void nvme_file_set_fault(struct nvme_file *f, enum nvme_file_fault kind, uint64_t after);
/* Starts the I/O thread for ctrl (created with nvme_file_ops and this backend). The thread calls
 * confine first (dev_host.io_thread: the VMM's filter for device I/O threads), NULL for none. */
int nvme_file_start(struct nvme_file *f, struct nvme_ctrl *ctrl,
		    int (*confine)(char *err, unsigned errlen), char *err, unsigned errlen);
/* nvme_ctrl_hooks.kick: wakes the I/O thread. */
void nvme_file_kick(void *f);
/* The eventfd that wakes the I/O thread (for KVM ioeventfds on doorbells). */
int nvme_file_kick_fd(const struct nvme_file *f);
bool nvme_file_direct(const struct nvme_file *f); /* O_DIRECT in use */
/* Writes submitted write-through (FUA, or the volatile write cache off) and zeroings synced. */
void nvme_file_durability(struct nvme_file *f, uint64_t *durable_writes, uint64_t *syncs);
/* Asks the I/O thread to stop and returns: a queued Write Zeroes or Deallocate ends between two
 * steps and completes with an error; the thread exits once the ring is empty. */
void nvme_file_request_stop(struct nvme_file *f);
/* Stops the thread after every request the backend holds has completed; closes the file. */
void nvme_file_close(struct nvme_file *f);
/* Tests: hook runs on the I/O thread, without the controller lock, before each bounded step
 * of a Write Zeroes or Deallocate. Set before the first of those is submitted. */
void nvme_file_set_zero_hook(struct nvme_file *f, void (*hook)(struct nvme_file *f, void *opaque),
			     void *opaque);

extern const struct nvme_backend_ops nvme_file_ops;

#endif
