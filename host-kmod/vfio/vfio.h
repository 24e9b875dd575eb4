/* User-space VFIO: one container (or iommufd context) per user, the groups and PCI devices in it,
 * their regions, interrupts, DMA mappings and reset. No KVM here: lvmm's passthrough device
 * (devices/vfio/) and softssd's NVMe driver (softssd --vfio) both sit on this, and the VFIO tests
 * run it inside a Linux guest whose vNVMe is bound to vfio-pci in no-IOMMU mode (docs/vfio.md). */
#ifndef LVMM_VFIO_H
#define LVMM_VFIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define VFIO_MAX_GROUPS 16
#define VFIO_MAX_SPARSE 8 /* mmap-able areas per region kept (the sparse-mmap capability) */
#define VFIO_NREGIONS	9 /* VFIO_PCI_NUM_REGIONS: BAR0..5, ROM, config, VGA */
#define VFIO_NIRQS	5 /* VFIO_PCI_NUM_IRQS: INTx, MSI, MSI-X, ERR, REQ */

/* Which kernel interface a container uses. */
enum vfio_backend {
	VFIO_BACKEND_NONE,
	VFIO_BACKEND_TYPE1,   /* /dev/vfio/vfio with VFIO_TYPE1v2_IOMMU */
	VFIO_BACKEND_NOIOMMU, /* /dev/vfio/vfio with VFIO_NOIOMMU_IOMMU: no DMA map, no isolation */
	VFIO_BACKEND_IOMMUFD, /* /dev/iommu + /dev/vfio/devices/vfioN (kernels that have it) */
};

struct vfio_group {
	int fd;
	int id;		/* /dev/vfio/ID, or noiommu-ID */
	unsigned users; /* devices open in it */
};

/* One container: every device of a VM (or of one softssd) shares its IOMMU mappings, so guest
 * RAM is mapped once, at IOVA = GPA. */
struct vfio_container {
	int fd; /* /dev/vfio/vfio, or /dev/iommu */
	enum vfio_backend backend;
	uint32_t ioas; /* iommufd's IO address space */
	uint64_t iova_pgsizes;
	bool allow_noiommu; /* no-IOMMU groups may join (vfio_container_open's flag) */
	unsigned ngroups;   /* groups open; a free slot of groups[] has fd -1 */
	struct vfio_group groups[VFIO_MAX_GROUPS];
};

struct vfio_sparse {
	uint64_t offset, size; /* inside the region */
};

struct vfio_region {
	uint32_t index;
	uint32_t flags;	 /* VFIO_REGION_INFO_FLAG_READ/WRITE/MMAP */
	uint64_t size;	 /* 0: the device does not implement it */
	uint64_t offset; /* of the region in the device fd */
	/* mmap-able areas: with MMAP and no sparse capability, one area covering the region */
	unsigned nsparse;
	struct vfio_sparse sparse[VFIO_MAX_SPARSE];
};

struct vfio_irq_type {
	uint32_t flags; /* VFIO_IRQ_INFO_EVENTFD/MASKABLE/AUTOMASKED/NORESIZE */
	uint32_t count; /* vectors (0: the device has none of this type) */
};

struct vfio_device {
	int fd;
	char name[32]; /* the PCI address, 0000:00:04.0 */
	struct vfio_container *c;
	int group;	/* index in c->groups, -1 for iommufd */
	uint32_t flags; /* VFIO_DEVICE_FLAGS_PCI, _RESET */
	uint32_t num_regions, num_irqs;
	struct vfio_region regions[VFIO_NREGIONS];
	struct vfio_irq_type irqs[VFIO_NIRQS];
};

/* A PCI address or a sysfs path (/sys/bus/pci/devices/BDF) as the canonical BDF; 0, or -EINVAL
 * with err for anything that is not one. */
int vfio_parse_bdf(const char *spec, char *bdf, size_t len, char *err, unsigned errlen);

/* The region info the kernel returned (len bytes: struct vfio_region_info and its capability
 * chain) as r, every offset and size checked: the index must be index, the region must fit in the
 * device fd, each capability header and the sparse-mmap areas inside len, the chain strictly
 * forward, the areas inside the region (more than VFIO_MAX_SPARSE: the rest are not mmap-able).
 * 0, or -EINVAL with err. Pure: no device needed. */
int vfio_region_parse(struct vfio_region *r, unsigned index, const void *info, size_t len,
		      char *err, unsigned errlen);

/* Opens a container: iommufd (/dev/iommu, one IOAS) when vfio_backend_choose(NULL, ...) says
 * so, else the legacy one, whose IOMMU type is set when the first group joins:
 * VFIO_TYPE1v2_IOMMU, or the no-IOMMU type for a no-IOMMU group (/dev/vfio/noiommu-N), which only
 * allow_noiommu admits (the user's explicit flag: no isolation, and DMA goes to physical
 * addresses). 0 or a negative errno with err. */
int vfio_container_open(struct vfio_container *c, bool allow_noiommu, char *err, unsigned errlen);
/* Closes the container and any group still in it: close its devices first. */
void vfio_container_close(struct vfio_container *c);

/* The system calls and roots of the iommufd backend and of the backend choice, replaced by the
 * unit tests' fake kernel and sysfs (tests/unit/test_vfio_iommufd.c). open/ioctl/close return
 * as the system calls do (-1 with errno). */
struct vfio_sys {
	int (*open)(const char *path, int flags);
	int (*ioctl)(int fd, unsigned long req, void *arg);
	int (*close)(int fd);
	const char *sysfs; /* "/sys" */
	const char *dev;   /* "/dev" */
};
extern const struct vfio_sys *vfio_sys;

/* Which backend a container (bdf NULL) or device bdf gets: LVMM_VFIO_BACKEND=iommufd or
 * =legacy forces one; otherwise iommufd when DEV/iommu and DEV/vfio/devices exist, no-IOMMU is
 * not allowed, and (with bdf) SYSFS/bus/pci/devices/BDF/vfio-dev/vfioN exists; else the legacy
 * container (VFIO_BACKEND_TYPE1, standing for TYPE1 or no-IOMMU). */
enum vfio_backend vfio_backend_choose(const char *bdf, bool allow_noiommu);

/* iommufd pieces (vfio_iommufd.c), called by the functions above and below for an iommufd
 * container; public for the unit tests. Each failure undoes its own steps and names the object. */
int vfio_iommufd_open(struct vfio_container *c, char *err, unsigned errlen);
void vfio_iommufd_close(struct vfio_container *c);
/* The device's cdev opened, bound to the container's iommufd and attached to its IOAS. */
int vfio_iommufd_device_bind(struct vfio_container *c, const char *bdf, int *fd, char *err,
			     unsigned errlen);
/* Detaches the device from its IOAS and closes the cdev (which unbinds it). */
void vfio_iommufd_device_release(int fd);
/* 0 when [iova, iova + size) lies inside one of the IOAS's allowed IOVA ranges. */
int vfio_iommufd_iova_fits(struct vfio_container *c, uint64_t iova, uint64_t size, char *err,
			   unsigned errlen);
int vfio_iommufd_map(struct vfio_container *c, uint64_t iova, uint64_t size, void *vaddr,
		     bool writable, char *err, unsigned errlen);
int vfio_iommufd_unmap(struct vfio_container *c, uint64_t iova, uint64_t size);

/* Opens device bdf: its group joins the container (the group must be viable: every device in it
 * bound to vfio-pci or to no driver), the device fd, its regions (with sparse-mmap areas) and IRQ
 * types read and checked. 0 or a negative errno with err naming the device and what is wrong. */
int vfio_device_open(struct vfio_container *c, const char *bdf, struct vfio_device *d, char *err,
		     unsigned errlen);
void vfio_device_close(struct vfio_device *d);

/* DMA: [iova, iova + size) to host memory at vaddr, page aligned. A no-IOMMU container has no
 * mappings: -EOPNOTSUPP (callers translate to physical addresses there, vfio_virt_to_phys). */
int vfio_dma_map(struct vfio_container *c, uint64_t iova, uint64_t size, void *vaddr, bool writable,
		 char *err, unsigned errlen);
int vfio_dma_unmap(struct vfio_container *c, uint64_t iova, uint64_t size);

/* No-IOMMU DMA: the physical address of a locked page of this process (/proc/self/pagemap, needs
 * CAP_SYS_ADMIN); 0 or a negative errno. */
int vfio_virt_to_phys(const void *vaddr, uint64_t *phys);
/* The same for npages locked pages from vaddr (page aligned) with one pagemap read: phys[i] the
 * physical address of page i. 0; -EINVAL for a NULL or unaligned vaddr, a NULL phys, npages 0 or
 * a range past the address space; -EFAULT when a page is not present, -EPERM when frame numbers
 * are hidden (no CAP_SYS_ADMIN), or another negative errno. phys[] is undefined on failure. */
int vfio_virt_to_phys_range(const void *vaddr, size_t npages, uint64_t *phys);
/* Keeps /proc/self/pagemap open for the process's life, so that later translations neither open
 * a file nor need CAP_SYS_ADMIN (the kernel shows frame numbers by the opener's capabilities):
 * what a process calls before it drops its capabilities and filters its system calls. 0 or a
 * negative errno; a second call does nothing. */
int vfio_pagemap_keep(void);

/* Region access through the device fd: exactly len bytes or a negative errno (a short read or
 * write is -EIO). Range checked against the region. */
int vfio_region_read(struct vfio_device *d, unsigned region, uint64_t off, void *buf, size_t len);
int vfio_region_write(struct vfio_device *d, unsigned region, uint64_t off, const void *buf,
		      size_t len);
/* Config space shorthands (region VFIO_PCI_CONFIG_REGION_INDEX). */
int vfio_cfg_read(struct vfio_device *d, unsigned off, void *buf, size_t len);
int vfio_cfg_write(struct vfio_device *d, unsigned off, const void *buf, size_t len);
/* Maps [off, off + size) of a region; it must lie inside one mmap-able area. NULL with errno. */
void *vfio_region_mmap(struct vfio_device *d, unsigned region, uint64_t off, uint64_t size,
		       int prot);

/* Interrupts. fds[i] (an eventfd, or -1 to leave vector start + i unsignalled) for count vectors
 * of type index (VFIO_PCI_MSIX_IRQ_INDEX ...): VFIO_DEVICE_SET_IRQS with
 * DATA_EVENTFD|ACTION_TRIGGER. count 0 disables the type. */
int vfio_irq_set(struct vfio_device *d, unsigned index, unsigned start, unsigned count,
		 const int *fds);
int vfio_irq_disable(struct vfio_device *d, unsigned index);
/* INTx: unmask, or have resample_fd (signalled by KVM at the guest's EOI) unmask it. */
int vfio_intx_unmask(struct vfio_device *d);
int vfio_intx_unmask_fd(struct vfio_device *d, int resample_fd);
int vfio_intx_mask(struct vfio_device *d);

/* The device's reset (FLR or what VFIO offers); -ENOTTY when it has none. */
int vfio_device_reset(struct vfio_device *d);

#endif
