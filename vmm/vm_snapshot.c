/* Snapshot and restore of a VM (vm.h, docs/snapshot.md): a paused VM's vCPUs, interrupt
 * controllers, kvmclock, COM1, legacy ports and devices into the state file (snapshot_fmt.h),
 * its RAM into a sparse memory file; and a VM built from the same config brought back to that
 * state, paused. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devices.h"
#include "snapshot_fmt.h"
#include "vm_internal.h"

#define SNAP_CONFIG_FILE "config.json"
#define SNAP_STATE_FILE	 "state.bin"
#define SNAP_MEMORY_FILE "memory.bin"
#define SNAP_CHUNK	 (64 * 1024) /* memory is written and skipped in pieces this big */

/* Every structure written raw into the state file has the size the format says: a change of the
 * KVM headers or of lvmm's own state structs fails the build instead of the format changing. */
_Static_assert(sizeof(struct kvm_clock_data) == SNAP_LEN_CLOCK, "kvm_clock_data");
_Static_assert(sizeof(struct kvm_irqchip) == SNAP_LEN_IRQCHIP, "kvm_irqchip");
_Static_assert(sizeof(struct kvm_pit_state2) == SNAP_LEN_PIT, "kvm_pit_state2");
_Static_assert(sizeof(struct ioapic_state) == SNAP_LEN_IOAPIC, "ioapic_state");
_Static_assert(sizeof(struct serial_state) == SNAP_LEN_SERIAL, "serial_state");
_Static_assert(sizeof(struct legacy_state) == SNAP_LEN_LEGACY, "legacy_state");
_Static_assert(sizeof(struct kvm_regs) == SNAP_LEN_REGS, "kvm_regs");
_Static_assert(sizeof(struct kvm_sregs) == SNAP_LEN_SREGS, "kvm_sregs");
_Static_assert(sizeof(struct kvm_fpu) == SNAP_LEN_FPU, "kvm_fpu");
_Static_assert(sizeof(struct kvm_xsave) == SNAP_LEN_XSAVE, "kvm_xsave");
_Static_assert(sizeof(struct kvm_lapic_state) == SNAP_LEN_LAPIC, "kvm_lapic_state");
_Static_assert(sizeof(struct kvm_msr_entry) == SNAP_LEN_MSR, "kvm_msr_entry");
_Static_assert(sizeof(struct kvm_mp_state) == SNAP_LEN_MP_STATE, "kvm_mp_state");
_Static_assert(sizeof(struct kvm_vcpu_events) == SNAP_LEN_EVENTS, "kvm_vcpu_events");
_Static_assert(sizeof(struct kvm_xcrs) == SNAP_LEN_XCRS, "kvm_xcrs");
_Static_assert(sizeof(struct kvm_debugregs) == SNAP_LEN_DEBUGREGS, "kvm_debugregs");

/* ---- host capabilities ---- */

static bool snap_has(struct vm *vm, long cap)
{
	return ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, cap) > 0;
}

/* The MSRs KVM lists for save/restore that this VM's vCPU 0 can read: some listed ones belong
 * to features the host or its CPUID lacks, and a read of one fails the whole batch. */
static int snap_msr_list(struct vm *vm, uint32_t **out, unsigned *n, unsigned *listed, char *err,
			 unsigned errlen)
{
	struct kvm_msr_list probe = {.nmsrs = 0}, *list;
	/* one MSR at a time: room for the header and a single entry */
	union {
		struct kvm_msrs h;
		uint8_t room[sizeof(struct kvm_msrs) + sizeof(struct kvm_msr_entry)];
	} one;
	uint32_t *idx;
	unsigned k = 0;

	if (ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, &probe) && errno != E2BIG) {
		snprintf(err, errlen, "KVM_GET_MSR_INDEX_LIST: %s", strerror(errno));
		return -errno;
	}
	if (probe.nmsrs > SNAP_MAX_MSRS)
		probe.nmsrs = SNAP_MAX_MSRS;
	list = calloc(1, sizeof(*list) + probe.nmsrs * sizeof(uint32_t));
	idx = calloc(probe.nmsrs ? probe.nmsrs : 1, sizeof(uint32_t));
	if (!list || !idx) {
		free(list);
		free(idx);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	list->nmsrs = probe.nmsrs;
	if (ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, list)) {
		snprintf(err, errlen, "KVM_GET_MSR_INDEX_LIST: %s", strerror(errno));
		free(list);
		free(idx);
		return -EIO;
	}
	for (unsigned i = 0; i < list->nmsrs; i++) {
		memset(&one, 0, sizeof(one));
		one.h.nmsrs = 1;
		one.h.entries[0].index = list->indices[i];
		if (ioctl(vm->vcpus[0].fd, KVM_GET_MSRS, &one) == 1)
			idx[k++] = list->indices[i];
	}
	*listed = list->nmsrs;
	free(list);
	*out = idx;
	*n = k;
	return 0;
}

/* ---- saving ---- */

static int snap_save_vcpu(struct vm *vm, struct vcpu *v, struct snap_writer *w,
			  const uint32_t *msr_idx, unsigned nmsrs, char *err, unsigned errlen)
{
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_fpu fpu;
	struct kvm_lapic_state lapic;
	struct kvm_mp_state mp;
	struct kvm_vcpu_events ev;
	struct kvm_debugregs dbg;
	struct kvm_msrs *msrs;
	const char *what = NULL;
	int r;

#define SNAP_GET(req, var, type)                                                                   \
	do {                                                                                       \
		if (ioctl(v->fd, req, &var)) {                                                     \
			what = #req;                                                               \
			goto fail;                                                                 \
		}                                                                                  \
		snap_put(w, type, v->id, &var, sizeof(var));                                       \
	} while (0)

	SNAP_GET(KVM_GET_REGS, regs, SNAP_VCPU_REGS);
	SNAP_GET(KVM_GET_SREGS, sregs, SNAP_VCPU_SREGS);
	SNAP_GET(KVM_GET_FPU, fpu, SNAP_VCPU_FPU);
	if (snap_has(vm, KVM_CAP_XSAVE)) {
		struct kvm_xsave *xs = calloc(1, sizeof(*xs));

		if (!xs || ioctl(v->fd, KVM_GET_XSAVE, xs)) {
			free(xs);
			what = "KVM_GET_XSAVE";
			goto fail;
		}
		snap_put(w, SNAP_VCPU_XSAVE, v->id, xs, sizeof(*xs));
		free(xs);
	}
	if (snap_has(vm, KVM_CAP_XCRS)) {
		struct kvm_xcrs xcrs;

		SNAP_GET(KVM_GET_XCRS, xcrs, SNAP_VCPU_XCRS);
	}
	SNAP_GET(KVM_GET_LAPIC, lapic, SNAP_VCPU_LAPIC);
	SNAP_GET(KVM_GET_MP_STATE, mp, SNAP_VCPU_MP_STATE);
	SNAP_GET(KVM_GET_VCPU_EVENTS, ev, SNAP_VCPU_EVENTS);
	SNAP_GET(KVM_GET_DEBUGREGS, dbg, SNAP_VCPU_DEBUGREGS);
#undef SNAP_GET
	msrs = calloc(1, sizeof(*msrs) + nmsrs * sizeof(struct kvm_msr_entry));
	if (!msrs) {
		snprintf(err, errlen, "vcpu %u: out of memory", v->id);
		return -ENOMEM;
	}
	msrs->nmsrs = nmsrs;
	for (unsigned i = 0; i < nmsrs; i++)
		msrs->entries[i].index = msr_idx[i];
	r = ioctl(v->fd, KVM_GET_MSRS, msrs);
	if (r != (int)nmsrs) {
		snprintf(err, errlen, "vcpu %u: KVM_GET_MSRS read %d of %u MSRs (stopped at 0x%x)",
			 v->id, r, nmsrs, r >= 0 && r < (int)nmsrs ? msr_idx[r] : 0);
		free(msrs);
		return -EIO;
	}
	snap_put(w, SNAP_VCPU_MSRS, v->id, msrs->entries, nmsrs * sizeof(struct kvm_msr_entry));
	free(msrs);
	return 0;
fail:
	r = -errno;
	snprintf(err, errlen, "vcpu %u: %s: %s", v->id, what, strerror(errno));
	return r ? r : -EIO;
}

static int snap_save_vm(struct vm *vm, struct snap_writer *w, unsigned *tsc_khz, char *err,
			unsigned errlen)
{
	struct kvm_clock_data clock = vm->paused_clock;
	struct serial_state ser;
	struct legacy_state leg;

	if (!clock.clock && ioctl(vm->vm_fd, KVM_GET_CLOCK, &clock)) {
		snprintf(err, errlen, "KVM_GET_CLOCK: %s", strerror(errno));
		return -errno;
	}
	clock.flags = 0;
	snap_put(w, SNAP_VM_CLOCK, 0, &clock, sizeof(clock));
	if (vm->split_irqchip) {
		struct ioapic_state io;

		ioapic_save(&vm->ioapic, &io);
		snap_put(w, SNAP_VM_IOAPIC_USER, 0, &io, sizeof(io));
	} else {
		static const uint32_t chips[] = {KVM_IRQCHIP_PIC_MASTER, KVM_IRQCHIP_PIC_SLAVE,
						 KVM_IRQCHIP_IOAPIC};
		static const uint32_t types[] = {SNAP_VM_PIC_MASTER, SNAP_VM_PIC_SLAVE,
						 SNAP_VM_IOAPIC_KVM};

		for (unsigned i = 0; i < 3; i++) {
			struct kvm_irqchip c = {.chip_id = chips[i]};

			if (ioctl(vm->vm_fd, KVM_GET_IRQCHIP, &c)) {
				snprintf(err, errlen, "KVM_GET_IRQCHIP (%s): %s",
					 snap_type_name(types[i]), strerror(errno));
				return -errno;
			}
			snap_put(w, types[i], 0, &c, sizeof(c));
		}
	}
	if (vm->has_pit) {
		struct kvm_pit_state2 pit;

		if (ioctl(vm->vm_fd, KVM_GET_PIT2, &pit)) {
			snprintf(err, errlen, "KVM_GET_PIT2: %s", strerror(errno));
			return -errno;
		}
		snap_put(w, SNAP_VM_PIT, 0, &pit, sizeof(pit));
	}
	/* the guest's TSC rate: a restore on a host of another rate sets it (or refuses) */
	{
		int khz = ioctl(vm->vcpus[0].fd, KVM_GET_TSC_KHZ);
		struct snap_tsc tsc = {.khz = khz > 0 ? (uint32_t)khz : 0};

		snap_put(w, SNAP_VM_TSC, 0, &tsc, sizeof(tsc));
		*tsc_khz = tsc.khz;
	}
	serial_save(&vm->serial, &ser);
	snap_put(w, SNAP_VM_SERIAL, 0, &ser, sizeof(ser));
	legacy_save(&vm->legacy, &leg);
	snap_put(w, SNAP_VM_LEGACY, 0, &leg, sizeof(leg));
	return 0;
}

/* len bytes of buf at off in fd (name for messages): 0, or -EIO with err set. */
static int snap_pwrite_all(int fd, const char *name, const void *buf, size_t len, uint64_t off,
			   char *err, unsigned errlen)
{
	size_t done = 0;

	while (done < len) {
		ssize_t k =
		    pwrite(fd, (const uint8_t *)buf + done, len - done, (off_t)(off + done));

		if (k <= 0) {
			snprintf(err, errlen, "%s: write at %llu: %s", name,
				 (unsigned long long)(off + done),
				 k ? strerror(errno) : "no space");
			return -EIO;
		}
		done += (size_t)k;
	}
	return 0;
}

int vm_ram_write_sparse(const struct vm *vm, int fd, const char *name, uint64_t *written, char *err,
			unsigned errlen)
{
	uint64_t size = vm->gmem.size;
	int r = 0;

	*written = 0;
	for (uint64_t off = 0; off < size && !r; off += SNAP_CHUNK) {
		size_t n = size - off < SNAP_CHUNK ? (size_t)(size - off) : SNAP_CHUNK;

		if (snap_all_zero(vm->ram + off, n))
			continue;
		r = snap_pwrite_all(fd, name, vm->ram + off, n, off, err, errlen);
		if (!r)
			*written += n;
	}
	return r;
}

/* fsync and close fd, whatever r is: r, or -EIO with err set when the sync fails. */
static int snap_sync_close(int fd, const char *name, int r, char *err, unsigned errlen)
{
	if (!r && fsync(fd)) {
		snprintf(err, errlen, "%s: fsync: %s", name, strerror(errno));
		r = -EIO;
	}
	close(fd);
	return r;
}

/* name in dirfd opened for writing and emptied: a regular file with no other link (a client's
 * hard link would have lvmm overwrite the file it names), never a FIFO's blocking open. */
static int snap_open_write(int dirfd, const char *name, char *err, unsigned errlen)
{
	int fd =
	    openat(dirfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	struct stat st;

	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", name, strerror(errno));
		return errno == ELOOP ? -EINVAL : -EIO;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_nlink != 1 || ftruncate(fd, 0)) {
		snprintf(err, errlen, "%s: not a regular file of one link lvmm can empty", name);
		close(fd);
		return -EINVAL;
	}
	return fd;
}

/* memory.bin is written under this name and renamed over the old one once whole: a VM restored
 * from the old one may map it (copy-on-write), which must never see it emptied or rewritten. */
#define SNAP_MEMORY_TMP ".memory.bin.new"

/* A new file for memory.bin under SNAP_MEMORY_TMP; memory.bin itself, when there, must be a
 * regular file of one link (as snap_open_write asks), though it is only replaced. */
static int snap_open_memory(int dirfd, char *err, unsigned errlen)
{
	struct stat st;
	int fd;

	if (!fstatat(dirfd, SNAP_MEMORY_FILE, &st, AT_SYMLINK_NOFOLLOW) &&
	    (!S_ISREG(st.st_mode) || st.st_nlink != 1)) {
		snprintf(err, errlen, "%s: not a regular file of one link lvmm can replace",
			 SNAP_MEMORY_FILE);
		return -EINVAL;
	}
	unlinkat(dirfd, SNAP_MEMORY_TMP, 0); /* a crashed save's, or anything by that name */
	fd = openat(dirfd, SNAP_MEMORY_TMP,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", SNAP_MEMORY_TMP, strerror(errno));
		return -EIO;
	}
	return fd;
}

/* RAM as a file as big as the RAM whose all-zero pieces are holes. */
static int snap_save_memory(struct vm *vm, int dirfd, const uint8_t *id, uint64_t *written,
			    char *err, unsigned errlen)
{
	int fd = snap_open_memory(dirfd, err, errlen);
	uint64_t size = vm->gmem.size;
	struct snap_mem_trailer t;
	int r;

	*written = 0;
	if (fd < 0)
		return fd;
	snap_mem_trailer_make(&t, size, id);
	r = snap_pwrite_all(fd, SNAP_MEMORY_FILE, &t, sizeof(t), size, err, errlen);
	if (r) {
		close(fd);
		return r;
	}
	if (ftruncate(fd, (off_t)(size + sizeof(t)))) {
		snprintf(err, errlen, "%s: %s", SNAP_MEMORY_FILE, strerror(errno));
		close(fd);
		return -EIO;
	}
	r = vm_ram_write_sparse(vm, fd, SNAP_MEMORY_FILE, written, err, errlen);
	r = snap_sync_close(fd, SNAP_MEMORY_FILE, r, err, errlen);
	if (!r && renameat(dirfd, SNAP_MEMORY_TMP, dirfd, SNAP_MEMORY_FILE)) {
		snprintf(err, errlen, "%s: rename: %s", SNAP_MEMORY_FILE, strerror(errno));
		r = -EIO;
	}
	if (r)
		unlinkat(dirfd, SNAP_MEMORY_TMP, 0);
	return r;
}

static int snap_write_file(int dirfd, const char *name, const void *buf, size_t len, char *err,
			   unsigned errlen)
{
	int fd = snap_open_write(dirfd, name, err, errlen);

	if (fd < 0)
		return fd;
	return snap_sync_close(fd, name, snap_pwrite_all(fd, name, buf, len, 0, err, errlen), err,
			       errlen);
}

/* What a VM must be for its state to be saved and restored whole. On kvm_pvm a Linux guest's
 * APs are started by lvmm (smp.c) when the guest asks: a snapshot is taken once every AP runs,
 * and the restored APs resume their saved state without that route. */
static int snap_supported(struct vm *vm, char *err, unsigned errlen)
{
	unsigned up = 1;

	/* a restore opens each tap again by the name its config gives: fds without one (a
	 * client's) cannot come back; `lvmm run --net tap=NAME` and a migration's destination
	 * hold the named tap's fds */
	for (unsigned i = 0; i < vm->cfg.nnets && i < CONFIG_MAX_NETS; i++)
		if (vm->cfg.nets[i].nfds && !vm->cfg.nets[i].tap[0]) {
			char id[sizeof(vm->cfg.nets[0].id)];

			virtio_net_id(&vm->cfg.nets[i], i, id, sizeof(id));
			snprintf(err, errlen,
				 "device %s: its tap was handed over as file descriptors, which a "
				 "restore cannot open again (give the tap by name)",
				 id);
			return -EOPNOTSUPP;
		}
	if (!vm->ap_manual || vm->boot.ap_entry)
		return 0;
	pthread_mutex_lock(&vm->lock);
	for (unsigned i = 1; i < vm->ncpus; i++)
		up += vm->vcpus[i].ap_up;
	pthread_mutex_unlock(&vm->lock);
	if (up < vm->ncpus) {
		snprintf(err, errlen,
			 "the guest has started %u of its %u vCPUs; save it once all run (this "
			 "host starts them on the guest's request)",
			 up, vm->ncpus);
		return -EBUSY;
	}
	return 0;
}

/* The state of a paused VM into w (finished): what state.bin holds. */
static int snap_save_state(struct vm *vm, const void *config, size_t config_len,
			   struct snap_writer *w, struct vm_snapshot_stats *stats, char *err,
			   unsigned errlen)
{
	uint32_t *msr_idx = NULL;
	unsigned nmsrs = 0;
	int r;

	/* the id that ties memory.bin to this state file */
	for (;;) {
		ssize_t k = getrandom(w->id, sizeof(w->id), 0);

		if (k == (ssize_t)sizeof(w->id))
			break;
		if (k < 0 && errno == EINTR)
			continue;
		snprintf(err, errlen, "getrandom: %s", k < 0 ? strerror(errno) : "short read");
		return -EIO;
	}
	pthread_mutex_lock(&vm->lock);
	r = vm->state == VM_PAUSED && !vm->stop_req ? 0 : -EINVAL;
	if (r)
		snprintf(err, errlen, "the VM is %s; pause it first (vm.pause)",
			 vm->stop_req ? "stopping" : vm_state_name(vm->state));
	pthread_mutex_unlock(&vm->lock);
	if (!r)
		r = snap_supported(vm, err, errlen);
	if (r)
		return r;
	/* the devices first: one that cannot be saved refuses the snapshot before any work */
	r = devices_save(vm, w, err, errlen);
	if (!r)
		r = snap_save_vm(vm, w, &stats->tsc_khz, err, errlen);
	if (!r)
		r = snap_msr_list(vm, &msr_idx, &nmsrs, &stats->msrs_listed, err, errlen);
	for (unsigned i = 0; !r && i < vm->ncpus; i++)
		r = snap_save_vcpu(vm, &vm->vcpus[i], w, msr_idx, nmsrs, err, errlen);
	free(msr_idx);
	if (!r) {
		r = snap_finish(w, vm->ncpus, vm->gmem.size, snap_hash(config, config_len));
		if (r)
			snprintf(err, errlen, "state file: %s", strerror(-r));
	}
	stats->state_bytes = w->len;
	stats->msrs = nmsrs;
	stats->xsave = snap_has(vm, KVM_CAP_XSAVE);
	stats->xcrs = snap_has(vm, KVM_CAP_XCRS);
	return r;
}

int vm_save_state(struct vm *vm, const void *config, size_t config_len, uint8_t **state,
		  size_t *len, struct vm_snapshot_stats *stats, char *err, unsigned errlen)
{
	struct snap_writer w;
	int r;

	memset(stats, 0, sizeof(*stats));
	*state = NULL;
	*len = 0;
	snap_writer_init(&w);
	r = snap_save_state(vm, config, config_len, &w, stats, err, errlen);
	if (r) {
		snap_writer_free(&w);
		return r;
	}
	*state = w.buf;
	*len = w.len;
	return 0;
}

int vm_save_check(struct vm *vm, char *err, unsigned errlen)
{
	int r = snap_supported(vm, err, errlen);

	return r ? r : devices_save_check(vm, err, errlen);
}

int vm_snapshot(struct vm *vm, int dirfd, const char *dir, const void *config, size_t config_len,
		struct vm_snapshot_stats *stats, char *err, unsigned errlen)
{
	struct snap_writer w;
	int r;

	memset(stats, 0, sizeof(*stats));
	snap_writer_init(&w);
	r = snap_save_state(vm, config, config_len, &w, stats, err, errlen);
	/* An older snapshot's state file goes first (and for good: the directory is no snapshot
	 * until the new one is complete), so a save that fails half-way never leaves it beside a
	 * half-written memory file. */
	if (!r && unlinkat(dirfd, SNAP_STATE_FILE, 0) && errno != ENOENT) {
		snprintf(err, errlen, "%s: %s", SNAP_STATE_FILE, strerror(errno));
		r = -EIO;
	}
	if (!r && fsync(dirfd)) {
		snprintf(err, errlen, "snapshot directory: fsync: %s", strerror(errno));
		r = -EIO;
	}
	if (!r)
		r = snap_save_memory(vm, dirfd, w.id, &stats->memory_written, err, errlen);
	if (!r)
		r = snap_write_file(dirfd, SNAP_CONFIG_FILE, config, config_len, err, errlen);
	/* the state file last: a directory without one is no snapshot */
	if (!r)
		r = snap_write_file(dirfd, SNAP_STATE_FILE, w.buf, w.len, err, errlen);
	if (!r && fsync(dirfd)) {
		snprintf(err, errlen, "snapshot directory: fsync: %s", strerror(errno));
		r = -EIO;
	}
	if (!r)
		fprintf(stderr,
			"lvmm: snapshot %s: %u vCPUs (%u of %u listed MSRs each, XSAVE %s, XCRs "
			"%s, TSC %u kHz), %llu of "
			"%llu MiB of RAM written, %llu bytes of state\n",
			dir, vm->ncpus, stats->msrs, stats->msrs_listed,
			stats->xsave ? "yes" : "no", stats->xcrs ? "yes" : "no", stats->tsc_khz,
			(unsigned long long)(stats->memory_written >> 20),
			(unsigned long long)(vm->gmem.size >> 20),
			(unsigned long long)stats->state_bytes);
	snap_writer_free(&w);
	return r;
}

/* ---- restoring ---- */

/* Reads a whole small file of the snapshot (at most max bytes) into a malloc'd buffer. */
static int snap_read_file(int dirfd, const char *name, size_t max, uint8_t **out, size_t *len,
			  char *err, unsigned errlen)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	uint8_t *buf;
	size_t done = 0;

	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", name, strerror(errno));
		return -EINVAL;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		snprintf(err, errlen, "%s: not a regular file of at most %zu bytes", name, max);
		close(fd);
		return -EINVAL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		snprintf(err, errlen, "%s: out of memory", name);
		return -ENOMEM;
	}
	while (done < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + done, (size_t)st.st_size - done);

		if (k <= 0)
			break;
		done += (size_t)k;
	}
	close(fd);
	buf[done] = 0;
	*out = buf;
	*len = done;
	return 0;
}

int vm_snapshot_read_config(int dirfd, char **config, size_t *len, char *err, unsigned errlen)
{
	return snap_read_file(dirfd, SNAP_CONFIG_FILE, 1u << 20, (uint8_t **)config, len, err,
			      errlen);
}

/* memory.bin into the RAM once its trailer names the state file's snapshot: the RAM is zeroed,
 * then each data extent of the file copied. */
static int snap_restore_memory(struct vm *vm, int dirfd, const struct snap_header *h, char *err,
			       unsigned errlen)
{
	int fd = openat(dirfd, SNAP_MEMORY_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	uint64_t size = vm->gmem.size;
	struct snap_mem_trailer t;
	struct stat st;
	off_t data = 0, hole;

	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", SNAP_MEMORY_FILE, strerror(errno));
		return -EINVAL;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != size + sizeof(t)) {
		snprintf(err, errlen,
			 "%s: %llu bytes, the snapshot's RAM is %llu (and a %zu-byte trailer)",
			 SNAP_MEMORY_FILE, (unsigned long long)st.st_size, (unsigned long long)size,
			 sizeof(t));
		close(fd);
		return -EINVAL;
	}
	if (pread(fd, &t, sizeof(t), (off_t)size) != (ssize_t)sizeof(t)) {
		snprintf(err, errlen, "%s: its trailer cannot be read", SNAP_MEMORY_FILE);
		close(fd);
		return -EINVAL;
	}
	if (snap_mem_trailer_check(&t, h, err, errlen)) {
		close(fd);
		return -EINVAL;
	}
	/* Mapped (copy-on-write): the restore reads nothing, the guest's first touch of a page
	 * reads it from the file, its first write copies it; holes read as zeros. Only while no
	 * device hands the RAM memfd to anyone: those see the memfd's pages. */
	/* A mapped file is the VM's RAM for as long as it runs: a file someone else may write or
	 * truncate would change the guest's pages under it, or fault lvmm itself (SIGBUS) on a
	 * page past a new end. So only one that only lvmm's user can write and that has no other
	 * name is mapped. */
	bool safe = st.st_uid == geteuid() && !(st.st_mode & 022) && st.st_nlink == 1;

	if (vm->cfg.mem_restore == CONFIG_MEM_RESTORE_ONDEMAND &&
	    (vm_ram_memfd_needed(&vm->cfg) || !safe)) {
		if (!safe)
			snprintf(err, errlen,
				 "memory_restore_mode OnDemand: %s must belong to lvmm's user, "
				 "be writable by it alone and have one link to be mapped (use "
				 "Copy)",
				 SNAP_MEMORY_FILE);
		else
			snprintf(err, errlen,
				 "memory_restore_mode OnDemand: a device of this VM hands its RAM "
				 "to another party (an SSD backend, vhost-user, VFIO), which needs "
				 "it Copy");
		close(fd);
		return -EINVAL;
	}
	if (vm->cfg.mem_restore != CONFIG_MEM_RESTORE_COPY && !vm_ram_memfd_needed(&vm->cfg) &&
	    safe) {
		int r = vm_map_ram_file(vm, fd, vm->cfg.mem_prefault, err, errlen);

		/* Auto falls back to the copy when the mapping failed and the memfd is back */
		if (!r || r == -EFAULT || vm->cfg.mem_restore == CONFIG_MEM_RESTORE_ONDEMAND) {
			close(fd);
			return r;
		}
	}
	if (madvise(vm->ram, size, MADV_REMOVE))
		memset(vm->ram, 0, size);
	for (;;) {
		data = lseek(fd, data, SEEK_DATA);
		if (data < 0 || (uint64_t)data >= size)
			break; /* ENXIO: no data past here (or the file grew meanwhile) */
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0 || (uint64_t)hole > size)
			hole = (off_t)size;
		while (data < hole) {
			ssize_t k = pread(fd, vm->ram + data, (size_t)(hole - data), data);

			if (k <= 0) {
				snprintf(err, errlen, "%s: read at %lld: %s", SNAP_MEMORY_FILE,
					 (long long)data, k ? strerror(errno) : "short file");
				close(fd);
				return -EIO;
			}
			data += k;
		}
	}
	close(fd);
	return 0;
}

/* The guest's TSC rate as saved: set on every vCPU (before their MSRs) when this host's differs.
 * KVM scales the TSC where the CPU can (KVM_CAP_TSC_CONTROL); without scaling it still takes a
 * rate above the host's (it keeps the guest's TSC caught up in software), and refuses one below,
 * which the restore then refuses too, naming both rates. */
static int snap_restore_tsc(struct vm *vm, const struct snap_reader *rd, char *err, unsigned errlen)
{
	struct snap_tsc tsc;
	int r = snap_get(rd, SNAP_VM_TSC, 0, &tsc, sizeof(tsc), err, errlen), cur;

	if (r)
		return r;
	if (tsc.flags) {
		snprintf(err, errlen, "state file: TSC section flags 0x%x", tsc.flags);
		return -EINVAL;
	}
	if (!tsc.khz)
		return 0; /* the saving host could not say: nothing to match */
	cur = ioctl(vm->vcpus[0].fd, KVM_GET_TSC_KHZ);
	if (cur == (int)tsc.khz)
		return 0;
	if (cur <= 0) {
		snprintf(err, errlen,
			 "the snapshot's guest TSC runs at %u kHz and KVM does not report this "
			 "host's rate (KVM_GET_TSC_KHZ)%s%s",
			 tsc.khz, cur < 0 ? ": " : "", cur < 0 ? strerror(errno) : "");
		return -EINVAL;
	}
	/* Without scaling KVM takes any rate above the host's by catching the guest's TSC up at
	 * each entry: approximate time, so only within a factor of two either way (a crafted
	 * state.bin cannot ask for a 4 THz guest clock). */
	if (tsc.khz / 2 > (unsigned)cur || (unsigned)cur / 2 > tsc.khz) {
		snprintf(
		    err, errlen,
		    "the snapshot's guest TSC runs at %u kHz, this host's at %d kHz: more than "
		    "a factor of two apart",
		    tsc.khz, cur);
		return -EINVAL;
	}
	for (unsigned i = 0; i < vm->ncpus; i++)
		if (ioctl(vm->vcpus[i].fd, KVM_SET_TSC_KHZ, (unsigned long)tsc.khz)) {
			snprintf(err, errlen,
				 "the snapshot's guest TSC runs at %u kHz, this host's at %d kHz, "
				 "and KVM cannot set it (vcpu %u: KVM_SET_TSC_KHZ: %s%s)",
				 tsc.khz, cur, i, strerror(errno),
				 snap_has(vm, KVM_CAP_TSC_CONTROL) ? "" : "; no TSC scaling here");
			return -EINVAL;
		}
	fprintf(stderr, "lvmm: restore: guest TSC set to the snapshot's %u kHz (host %d kHz)\n",
		tsc.khz, cur);
	return 0;
}

static int snap_restore_vm(struct vm *vm, const struct snap_reader *rd, char *err, unsigned errlen)
{
	struct serial_state ser;
	struct legacy_state leg;
	int r;

	r = snap_restore_tsc(vm, rd, err, errlen);
	if (r)
		return r;
	r = snap_get(rd, SNAP_VM_CLOCK, 0, &vm->paused_clock, sizeof(vm->paused_clock), err,
		     errlen);
	if (r)
		return r;
	vm->paused_clock.flags = 0;
	if (vm->split_irqchip != !!snap_find(rd, SNAP_VM_IOAPIC_USER, 0) ||
	    vm->has_pit != !!snap_find(rd, SNAP_VM_PIT, 0)) {
		snprintf(err, errlen,
			 "the snapshot's interrupt controllers (%s IOAPIC, %s) differ from this "
			 "VM's (%s IOAPIC, %s): LVMM_IRQCHIP or LVMM_PIT differ",
			 snap_find(rd, SNAP_VM_IOAPIC_USER, 0) ? "user-space" : "in-kernel",
			 snap_find(rd, SNAP_VM_PIT, 0) ? "a PIT" : "no PIT",
			 vm->split_irqchip ? "user-space" : "in-kernel",
			 vm->has_pit ? "a PIT" : "no PIT");
		return -EINVAL;
	}
	if (vm->split_irqchip) {
		struct ioapic_state io;

		r = snap_get(rd, SNAP_VM_IOAPIC_USER, 0, &io, sizeof(io), err, errlen);
		if (!r && ioapic_restore(&vm->ioapic, &io)) {
			snprintf(err, errlen, "state file: IOAPIC state out of range");
			r = -EINVAL;
		}
		if (r)
			return r;
	} else {
		static const uint32_t chips[] = {KVM_IRQCHIP_PIC_MASTER, KVM_IRQCHIP_PIC_SLAVE,
						 KVM_IRQCHIP_IOAPIC};
		static const uint32_t types[] = {SNAP_VM_PIC_MASTER, SNAP_VM_PIC_SLAVE,
						 SNAP_VM_IOAPIC_KVM};

		for (unsigned i = 0; i < 3; i++) {
			struct kvm_irqchip c;

			r = snap_get(rd, types[i], 0, &c, sizeof(c), err, errlen);
			if (r)
				return r;
			if (c.chip_id != chips[i]) {
				snprintf(err, errlen, "state file: %s section names chip %u",
					 snap_type_name(types[i]), c.chip_id);
				return -EINVAL;
			}
			if (ioctl(vm->vm_fd, KVM_SET_IRQCHIP, &c)) {
				snprintf(err, errlen, "KVM_SET_IRQCHIP (%s): %s",
					 snap_type_name(types[i]), strerror(errno));
				return -EINVAL;
			}
		}
	}
	if (vm->has_pit) {
		struct kvm_pit_state2 pit;

		r = snap_get(rd, SNAP_VM_PIT, 0, &pit, sizeof(pit), err, errlen);
		if (r)
			return r;
		if (ioctl(vm->vm_fd, KVM_SET_PIT2, &pit)) {
			snprintf(err, errlen, "KVM_SET_PIT2: %s", strerror(errno));
			return -EINVAL;
		}
	}
	r = snap_get(rd, SNAP_VM_SERIAL, 0, &ser, sizeof(ser), err, errlen);
	if (!r && serial_restore(&vm->serial, &ser)) {
		snprintf(err, errlen, "state file: serial state out of range");
		r = -EINVAL;
	}
	if (!r)
		r = snap_get(rd, SNAP_VM_LEGACY, 0, &leg, sizeof(leg), err, errlen);
	if (!r)
		legacy_restore(&vm->legacy, &leg);
	return r;
}

static int snap_restore_vcpu(struct vm *vm, struct vcpu *v, const struct snap_reader *rd,
			     const uint32_t *msr_ok, unsigned nmsr_ok, char *err, unsigned errlen)
{
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_fpu fpu;
	struct kvm_lapic_state lapic;
	struct kvm_mp_state mp;
	struct kvm_vcpu_events ev;
	struct kvm_debugregs dbg;
	const struct snap_ref *m;
	struct kvm_msrs *msrs;
	const char *what = NULL;
	unsigned n;
	int r;

#define SNAP_SET(req, var, type)                                                                   \
	do {                                                                                       \
		r = snap_get(rd, type, v->id, &var, sizeof(var), err, errlen);                     \
		if (r)                                                                             \
			return r;                                                                  \
		if (ioctl(v->fd, req, &var)) {                                                     \
			what = #req;                                                               \
			goto fail;                                                                 \
		}                                                                                  \
	} while (0)

	SNAP_SET(KVM_SET_SREGS, sregs, SNAP_VCPU_SREGS);
	SNAP_SET(KVM_SET_REGS, regs, SNAP_VCPU_REGS);
	if (snap_find(rd, SNAP_VCPU_XSAVE, v->id)) {
		struct kvm_xsave *xs = calloc(1, sizeof(*xs));

		if (!xs)
			return -ENOMEM;
		r = snap_get(rd, SNAP_VCPU_XSAVE, v->id, xs, sizeof(*xs), err, errlen);
		if (!r && ioctl(v->fd, KVM_SET_XSAVE, xs)) {
			snprintf(err, errlen, "vcpu %u: KVM_SET_XSAVE: %s", v->id, strerror(errno));
			r = -EINVAL;
		}
		free(xs);
		if (r)
			return r;
	} else {
		SNAP_SET(KVM_SET_FPU, fpu, SNAP_VCPU_FPU);
	}
	if (snap_find(rd, SNAP_VCPU_XCRS, v->id)) {
		struct kvm_xcrs xcrs;

		SNAP_SET(KVM_SET_XCRS, xcrs, SNAP_VCPU_XCRS);
	} else if (snap_has(vm, KVM_CAP_XCRS)) {
		/* XCR0 left at its reset value: a guest that enabled AVX would fault */
		snprintf(err, errlen, "state file: vcpu %u: no XCRs, which this host saves", v->id);
		return -EINVAL;
	}
	SNAP_SET(KVM_SET_LAPIC, lapic, SNAP_VCPU_LAPIC);
	m = snap_find(rd, SNAP_VCPU_MSRS, v->id);
	if (!m || m->len % sizeof(struct kvm_msr_entry) ||
	    m->len / sizeof(struct kvm_msr_entry) > SNAP_MAX_MSRS) {
		snprintf(err, errlen, "state file: vcpu %u: MSR section missing or malformed",
			 v->id);
		return -EINVAL;
	}
	n = (unsigned)(m->len / sizeof(struct kvm_msr_entry));
	msrs = calloc(1, sizeof(*msrs) + m->len);
	if (!msrs)
		return -ENOMEM;
	msrs->nmsrs = n;
	memcpy(msrs->entries, m->data, m->len);
	/* only MSRs this host's KVM saves and restores: the file names no other */
	for (unsigned i = 0; i < n; i++) {
		unsigned k = 0;

		while (k < nmsr_ok && msr_ok[k] != msrs->entries[i].index)
			k++;
		if (k == nmsr_ok || msrs->entries[i].reserved) {
			snprintf(err, errlen,
				 "state file: vcpu %u: MSR 0x%x is not one this host's KVM saves",
				 v->id, msrs->entries[i].index);
			free(msrs);
			return -EINVAL;
		}
	}
	r = ioctl(v->fd, KVM_SET_MSRS, msrs);
	if (r != (int)n) {
		snprintf(err, errlen,
			 "vcpu %u: KVM_SET_MSRS took %d of %u MSRs (refused: 0x%x = 0x%llx)", v->id,
			 r, n, r >= 0 && r < (int)n ? msrs->entries[r].index : 0,
			 r >= 0 && r < (int)n ? (unsigned long long)msrs->entries[r].data : 0ULL);
		free(msrs);
		return -EINVAL;
	}
	free(msrs);
	SNAP_SET(KVM_SET_MP_STATE, mp, SNAP_VCPU_MP_STATE);
	r = snap_get(rd, SNAP_VCPU_EVENTS, v->id, &ev, sizeof(ev), err, errlen);
	if (r)
		return r;
	/* only what KVM_GET_VCPU_EVENTS reports is valid to set; nothing beyond */
	ev.flags &= KVM_VCPUEVENT_VALID_NMI_PENDING | KVM_VCPUEVENT_VALID_SIPI_VECTOR |
		    KVM_VCPUEVENT_VALID_SHADOW | KVM_VCPUEVENT_VALID_SMM |
		    KVM_VCPUEVENT_VALID_PAYLOAD | KVM_VCPUEVENT_VALID_TRIPLE_FAULT;
	if (ioctl(v->fd, KVM_SET_VCPU_EVENTS, &ev)) {
		what = "KVM_SET_VCPU_EVENTS";
		goto fail;
	}
	SNAP_SET(KVM_SET_DEBUGREGS, dbg, SNAP_VCPU_DEBUGREGS);
#undef SNAP_SET
	return 0;
fail:
	r = errno;
	snprintf(err, errlen, "vcpu %u: %s: %s (the saved state is not valid here)", v->id, what,
		 strerror(r));
	return -EINVAL;
}

/* The parsed state file against the VM cfg describes and the config bytes it came with. */
static int snap_check_state(const struct snap_reader *rd, const struct vm_config *cfg,
			    const void *config, size_t config_len, char *err, unsigned errlen)
{
	if (rd->h.config_hash != snap_hash(config, config_len)) {
		snprintf(err, errlen,
			 "%s does not belong to this state file (changed or from another snapshot)",
			 SNAP_CONFIG_FILE);
		return -EINVAL;
	}
	if (rd->h.ncpus != cfg->cpus || rd->h.memory != cfg->memory) {
		snprintf(err, errlen,
			 "state file: %u vCPUs and %llu bytes of RAM, the config says %u and %llu",
			 rd->h.ncpus, (unsigned long long)rd->h.memory, cfg->cpus,
			 (unsigned long long)cfg->memory);
		return -EINVAL;
	}
	for (unsigned i = 0; i < cfg->cpus; i++)
		if (!snap_find(rd, SNAP_VCPU_REGS, i)) {
			snprintf(err, errlen, "state file: no state for vCPU %u of %u", i,
				 cfg->cpus);
			return -EINVAL;
		}
	return 0;
}

int vm_restore_create(const struct vm_config *cfg, struct vm **out, char *err, unsigned errlen)
{
	int r = vm_create(cfg, out, err, errlen);

	if (r)
		return r;
	(*out)->restored = true;
	for (unsigned i = 1; i < (*out)->ncpus; i++)
		(*out)->vcpus[i].ap_up = true;
	return 0;
}

/* Everything but the RAM from rd into vm (from vm_restore_create, its RAM in place), then its
 * threads started, Paused. */
static int snap_restore_rest(struct vm *vm, const struct snap_reader *rd, char *err,
			     unsigned errlen)
{
	uint32_t *msr_ok = NULL;
	unsigned nmsr_ok = 0, listed = 0;
	int r;

	r = snap_restore_vm(vm, rd, err, errlen);
	if (!r)
		r = snap_msr_list(vm, &msr_ok, &nmsr_ok, &listed, err, errlen);
	for (unsigned i = 0; !r && i < vm->ncpus; i++)
		r = snap_restore_vcpu(vm, &vm->vcpus[i], rd, msr_ok, nmsr_ok, err, errlen);
	free(msr_ok);
	if (!r)
		r = devices_restore(vm, rd, err, errlen);
	if (!r)
		r = vm_start_paused(vm, err, errlen);
	return r;
}

int vm_restore_state(struct vm *vm, const void *state, size_t state_len, const void *config,
		     size_t config_len, char *err, unsigned errlen)
{
	struct snap_reader rd = {0};
	int r = snap_parse(state, state_len, &rd, err, errlen);

	if (!r)
		r = snap_check_state(&rd, &vm->cfg, config, config_len, err, errlen);
	if (!r)
		r = snap_restore_rest(vm, &rd, err, errlen);
	snap_reader_free(&rd);
	return r;
}

int vm_restore(const struct vm_config *cfg, int dirfd, const void *config, size_t config_len,
	       struct vm **out, char *err, unsigned errlen)
{
	struct snap_reader rd = {0};
	struct vm *vm = NULL;
	uint8_t *state = NULL;
	size_t state_len = 0;
	int r;

	*out = NULL;
	r = snap_read_file(dirfd, SNAP_STATE_FILE, SNAP_MAX_FILE, &state, &state_len, err, errlen);
	if (!r)
		r = snap_parse(state, state_len, &rd, err, errlen);
	if (!r)
		r = snap_check_state(&rd, cfg, config, config_len, err, errlen);
	if (!r)
		r = vm_restore_create(cfg, &vm, err, errlen);
	if (!r)
		r = snap_restore_memory(vm, dirfd, &rd.h, err, errlen);
	if (!r)
		r = snap_restore_rest(vm, &rd, err, errlen);
	snap_reader_free(&rd);
	free(state);
	if (r) {
		vm_destroy(vm);
		return r;
	}
	*out = vm;
	return 0;
}
