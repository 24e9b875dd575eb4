/* Guest memory of a VM (vm.h): RAM from one sealed memfd, mapped shared and split around the
 * 32-bit PCI hole, its KVM memory slots (a reboot keeps the memfd and drops its pages), RAM
 * faulted in for SSD backends that map it, and host memory devices map into the guest. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layout.h"
#include "vm_internal.h"

static int vm_set_slot(struct vm *vm, unsigned slot, uint64_t gpa, uint64_t size, void *host,
		       uint32_t flags)
{
	struct kvm_userspace_memory_region r = {
	    .slot = slot,
	    .flags = flags,
	    .guest_phys_addr = gpa,
	    .memory_size = size,
	    .userspace_addr = (uint64_t)(uintptr_t)host,
	};

	return ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) ? -errno : 0;
}

/* Whether a vNVMe function hands guest RAM to its SSD backend as a DMA window (passthrough and
 * isolated modes over softssd or the kernel module; emulate mode uses a bounce buffer). */
bool vm_vnvme_maps_ram(const struct vnvme_config *v)
{
	return v->ssd[0] && v->mode != VNVME_EMULATE;
}

/* Guest RAM is charged to whoever faults a page first: when an SSD backend maps it, lvmm faults
 * all of it in before the backend sees it, so the VM's memory is the VM's (issue 23, finding
 * 6), and softssd --require-resident accepts the window. */
int vm_populate_ram(struct vm *vm, char *err, unsigned errlen)
{
	int r = gmem_populate(vm->ram, vm->ram_map_size);

	if (r)
		snprintf(
		    err, errlen,
		    "memory: cannot populate %llu MiB of guest RAM for an SSD-backed vNVMe: %s",
		    (unsigned long long)(vm->ram_map_size >> 20), strerror(-r));
	return r;
}

/* The memfd mapped shared over the RAM again, at the same address (KVM's and gmem's slots and
 * every device keep their pointers), after a private mapping of a snapshot file: 0 or -errno. */
static int vm_ram_map_memfd(struct vm *vm)
{
	if (mmap(vm->ram, vm->gmem.size, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED | MAP_NORESERVE, vm->gmem.memfd, 0) == MAP_FAILED)
		return -errno;
	vm->ram_mapped = false;
	madvise(vm->ram, vm->gmem.size, MADV_MERGEABLE);
	return 0;
}

int vm_create_memory(struct vm *vm, char *err, unsigned errlen)
{
	uint64_t size = vm->cfg.memory, lo, hi;
	int ret;

	if (size < CONFIG_MIN_MEMORY || size & 0xfff) {
		snprintf(err, errlen, "memory: %llu bytes is below %llu MiB or not page-aligned",
			 (unsigned long long)size, CONFIG_MIN_MEMORY >> 20);
		return -EINVAL;
	}
	lo = size < LAYOUT_MMIO32_START ? size : LAYOUT_MMIO32_START;
	hi = size - lo;
	if (vm->ram) {
		/* Reboot: same memfd, every page dropped, so the guest starts from zeroed RAM; a
		 * RAM mapped from a snapshot file is the memfd's again. */
		ret = vm->ram_mapped ? vm_ram_map_memfd(vm) : 0;
		if (ret) {
			snprintf(err, errlen, "memory: mmap of the RAM memfd: %s", strerror(-ret));
			return ret;
		}
		if (madvise(vm->ram, size, MADV_REMOVE))
			memset(vm->ram, 0, size);
		goto slots;
	}
	vm->gmem.memfd = memfd_create("lvmm-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (vm->gmem.memfd < 0) {
		ret = -errno;
		snprintf(err, errlen, "memory: memfd_create: %s", strerror(errno));
		return ret;
	}
	/* Sealed against resizing: a backend (softssd) maps it for DMA and a shrink would fault
	 * it; the backend refuses an unsealed window. */
	if (ftruncate(vm->gmem.memfd, (off_t)size) ||
	    fcntl(vm->gmem.memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)) {
		ret = -errno;
		snprintf(err, errlen, "memory: %llu MiB: %s", (unsigned long long)(size >> 20),
			 strerror(errno));
		return ret;
	}
	/* Shared, so that backends mapping the memfd see the same pages as the guest. */
	vm->ram =
	    mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, vm->gmem.memfd, 0);
	if (vm->ram == MAP_FAILED) {
		ret = -errno;
		vm->ram = NULL;
		snprintf(err, errlen, "memory: mmap of %llu MiB: %s",
			 (unsigned long long)(size >> 20), strerror(errno));
		return ret;
	}
	vm->ram_map_size = size;
	madvise(vm->ram, size, MADV_MERGEABLE);
	vm->gmem.size = size;
	vm->gmem.slots[0] = (struct gmem_slot){.gpa = 0, .size = lo, .host = vm->ram, .fd_off = 0};
	vm->gmem.nslots = 1;
	if (hi) {
		vm->gmem.slots[1] = (struct gmem_slot){
		    .gpa = LAYOUT_RAM_HIGH, .size = hi, .host = vm->ram + lo, .fd_off = lo};
		vm->gmem.nslots = 2;
	}
	slots:
	for (unsigned k = 0; k < vm->cfg.nvnvme && k < CONFIG_MAX_VNVME; k++)
		if (vm_vnvme_maps_ram(&vm->cfg.vnvme[k])) {
			ret = vm_populate_ram(vm, err, errlen);
			if (ret)
				return ret;
			break;
		}
	for (vm->next_slot = 0; vm->next_slot < vm->gmem.nslots; vm->next_slot++) {
		struct gmem_slot *s = &vm->gmem.slots[vm->next_slot];

		ret = vm_set_slot(vm, vm->next_slot, s->gpa, s->size, s->host, 0);
		if (ret) {
			snprintf(err, errlen, "memory: slot at 0x%llx: %s",
				 (unsigned long long)s->gpa, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/* KVM memory-slot id of host map i: RAM slots first, then one fixed id per maps[] entry. */
static unsigned vm_host_map_slot(const struct vm *vm, unsigned i)
{
	return vm->gmem.nslots + i;
}

int vm_map_host_mem(struct vm *vm, uint64_t gpa, uint64_t size, void *host, bool readonly)
{
	unsigned i;
	int ret;

	if (!size || (gpa | size | (uintptr_t)host) & 0xfff)
		return -EINVAL;
	pthread_mutex_lock(&vm->route_lock);
	for (i = 0; i < VM_MAX_HOST_MAPS && vm->maps[i].used; i++)
		;
	if (i == VM_MAX_HOST_MAPS) {
		ret = -ENOSPC;
		goto out;
	}
	/* The slot id follows the table entry, so an unmapped BAR frees its id for the next map:
	 * a guest toggling a BAR's decode forever never runs out of KVM memory slots. */
	ret = vm_set_slot(vm, vm_host_map_slot(vm, i), gpa, size, host,
			  readonly ? KVM_MEM_READONLY : 0);
	if (!ret) {
		vm->maps[i] = (struct vm_host_map){
		    .gpa = gpa, .size = size, .slot = vm_host_map_slot(vm, i), .used = true};
	}
out:
	pthread_mutex_unlock(&vm->route_lock);
	return ret;
}

int vm_unmap_host_mem(struct vm *vm, uint64_t gpa)
{
	unsigned i;
	int ret = -ENOENT;

	pthread_mutex_lock(&vm->route_lock);
	for (i = 0; i < VM_MAX_HOST_MAPS; i++) {
		if (vm->maps[i].used && vm->maps[i].gpa == gpa) {
			/* Size 0 deletes a slot. */
			ret = vm_set_slot(vm, vm->maps[i].slot, gpa, 0, NULL, 0);
			if (!ret)
				vm->maps[i].used = false;
			break;
		}
	}
	pthread_mutex_unlock(&vm->route_lock);
	return ret;
}

/* ---- live migration (vm_migrate.c) ---- */

int vm_ram_dirty_log(struct vm *vm, bool on)
{
	int ret = 0;

	for (unsigned i = 0; i < vm->gmem.nslots; i++) {
		struct gmem_slot *s = &vm->gmem.slots[i];
		int r =
		    vm_set_slot(vm, i, s->gpa, s->size, s->host, on ? KVM_MEM_LOG_DIRTY_PAGES : 0);

		if (r && !ret)
			ret = r;
	}
	return ret;
}

int vm_ram_dirty_get(struct vm *vm, unsigned slot, uint64_t *bitmap)
{
	struct kvm_dirty_log log = {.slot = slot, .dirty_bitmap = bitmap};

	return ioctl(vm->vm_fd, KVM_GET_DIRTY_LOG, &log) ? -errno : 0;
}

int vm_adopt_ram(struct vm *vm, int memfd, char *err, unsigned errlen)
{
	struct stat st;
	int seals = fcntl(memfd, F_GET_SEALS);
	void *p;

	if (fstat(memfd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != vm->gmem.size ||
	    seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
		snprintf(err, errlen, "the RAM memfd is not a sealed memfd of the VM's %llu bytes",
			 (unsigned long long)vm->gmem.size);
		return -EINVAL;
	}
	if (vm->ram_map_size != vm->gmem.size || vm->state != VM_CREATED) {
		snprintf(err, errlen, "the VM's RAM cannot be replaced now");
		return -EINVAL;
	}
	/* the same address: KVM's slots, gmem's slots and every device keep their pointers */
	p = mmap(vm->ram, vm->gmem.size, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED | MAP_NORESERVE, memfd, 0);
	if (p == MAP_FAILED) {
		snprintf(err, errlen, "the RAM memfd: mmap: %s", strerror(errno));
		return -EINVAL;
	}
	close(vm->gmem.memfd);
	vm->gmem.memfd = memfd;
	return 0;
}

/* ---- snapshot files as RAM (vm_snapshot.c) ---- */

bool vm_ram_memfd_needed(const struct vm_config *cfg)
{
	for (unsigned k = 0; k < cfg->nvnvme && k < CONFIG_MAX_VNVME; k++)
		if (vm_vnvme_maps_ram(&cfg->vnvme[k]))
			return true;
	return cfg->nfs || cfg->ndevices;
}

int vm_map_ram_file(struct vm *vm, int fd, bool prefault, char *err, unsigned errlen)
{
	void *p;

	if (vm->ram_map_size != vm->gmem.size || vm->state != VM_CREATED) {
		snprintf(err, errlen, "the VM's RAM cannot be replaced now");
		return -EINVAL;
	}
	/* the same address: KVM's slots (whose pages KVM drops as the mapping changes), gmem's
	 * slots and every device keep their pointers */
	p = mmap(vm->ram, vm->gmem.size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, fd, 0);
	if (p == MAP_FAILED) {
		int e = errno;

		snprintf(err, errlen, "mmap of the memory file: %s", strerror(e));
		/* the address range is unmapped or the file's now: the memfd back over it */
		return vm_ram_map_memfd(vm) ? -EFAULT : -e;
	}
	vm->ram_mapped = true;
	madvise(vm->ram, vm->gmem.size, MADV_MERGEABLE);
	/* prefault: the file's pages read in and mapped, not copied (MAP_POPULATE on a writable
	 * private mapping would make every page a private copy); read-ahead where the kernel
	 * predates MADV_POPULATE_READ */
	if (prefault && madvise(vm->ram, vm->gmem.size, MADV_POPULATE_READ))
		madvise(vm->ram, vm->gmem.size, MADV_WILLNEED);
	return 0;
}

int vm_ram_share(struct vm *vm, char *err, unsigned errlen)
{
	uint64_t written;
	int r;

	if (!vm->ram_mapped)
		return 0;
	/* the memfd's pages are all zero (it was emptied for the restore): what is not zero is
	 * written, the rest stays holes */
	if (fallocate(vm->gmem.memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
		      (off_t)vm->gmem.size))
		return snprintf(err, errlen, "the RAM memfd: %s", strerror(errno)), -EIO;
	r = vm_ram_write_sparse(vm, vm->gmem.memfd, "the RAM memfd", &written, err, errlen);
	if (r)
		return r;
	r = vm_ram_map_memfd(vm);
	if (r)
		snprintf(err, errlen, "the RAM memfd: mmap: %s", strerror(-r));
	return r ? -EFAULT : 0;
}
