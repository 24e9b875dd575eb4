/* The kernel's iommufd ABI (/dev/iommu) and the VFIO device cdev requests lvmm uses, written out
 * here because the 6.1 headers of this project's hosts and guests lack them (added in 6.2, 6.6).
 * Each struct's size and each field's offset is pinned; each request number is both written out
 * and checked against its _IO() computation. Only the VFIO library includes this. */
#ifndef LVMM_IOMMUFD_UAPI_H
#define LVMM_IOMMUFD_UAPI_H

#include <linux/ioctl.h>
#include <stddef.h>
#include <stdint.h>

#define IOMMUFD_TYPE   ';' /* shared with VFIO's type */
#define VFIO_CDEV_BASE 100

/* struct iommu_destroy: frees an object (the IOAS) by id */
struct iommufd_destroy {
	uint32_t size;
	uint32_t id;
};

struct iommufd_ioas_alloc {
	uint32_t size;
	uint32_t flags; /* 0 */
	uint32_t out_ioas_id;
};

struct iommufd_iova_range {
	uint64_t start;
	uint64_t last; /* inclusive */
};

struct iommufd_ioas_iova_ranges {
	uint32_t size;
	uint32_t ioas_id;
	uint32_t num_iovas; /* in: entries at allowed_iovas; out: entries the kernel has */
	uint32_t reserved;
	uint64_t allowed_iovas; /* user pointer to struct iommufd_iova_range[num_iovas] */
	uint64_t out_iova_alignment;
};

#define IOMMUFD_MAP_FIXED_IOVA (1u << 0)
#define IOMMUFD_MAP_WRITEABLE  (1u << 1)
#define IOMMUFD_MAP_READABLE   (1u << 2)

struct iommufd_ioas_map {
	uint32_t size;
	uint32_t flags;
	uint32_t ioas_id;
	uint32_t reserved;
	uint64_t user_va;
	uint64_t length;
	uint64_t iova;
};

struct iommufd_ioas_unmap {
	uint32_t size;
	uint32_t ioas_id;
	uint64_t iova;
	uint64_t length; /* out: bytes unmapped */
};

/* VFIO device cdev (/dev/vfio/devices/vfioN) */
struct vfio_cdev_bind_iommufd {
	uint32_t argsz;
	uint32_t flags; /* 0 */
	int32_t iommufd;
	uint32_t out_devid;
};

struct vfio_cdev_attach_pt {
	uint32_t argsz;
	uint32_t flags; /* 0 */
	uint32_t pt_id; /* the IOAS */
};

struct vfio_cdev_detach_pt {
	uint32_t argsz;
	uint32_t flags; /* 0 */
};

#define IOMMUFD_IOC_DESTROY	     0x3b80u
#define IOMMUFD_IOC_IOAS_ALLOC	     0x3b81u
#define IOMMUFD_IOC_IOAS_IOVA_RANGES 0x3b84u
#define IOMMUFD_IOC_IOAS_MAP	     0x3b85u
#define IOMMUFD_IOC_IOAS_UNMAP	     0x3b86u
#define VFIO_CDEV_IOC_BIND_IOMMUFD   0x3b76u
#define VFIO_CDEV_IOC_ATTACH_PT	     0x3b77u
#define VFIO_CDEV_IOC_DETACH_PT	     0x3b78u

_Static_assert(IOMMUFD_IOC_DESTROY == _IO(IOMMUFD_TYPE, 0x80), "IOMMU_DESTROY");
_Static_assert(IOMMUFD_IOC_IOAS_ALLOC == _IO(IOMMUFD_TYPE, 0x81), "IOMMU_IOAS_ALLOC");
_Static_assert(IOMMUFD_IOC_IOAS_IOVA_RANGES == _IO(IOMMUFD_TYPE, 0x84), "IOMMU_IOAS_IOVA_RANGES");
_Static_assert(IOMMUFD_IOC_IOAS_MAP == _IO(IOMMUFD_TYPE, 0x85), "IOMMU_IOAS_MAP");
_Static_assert(IOMMUFD_IOC_IOAS_UNMAP == _IO(IOMMUFD_TYPE, 0x86), "IOMMU_IOAS_UNMAP");
_Static_assert(VFIO_CDEV_IOC_BIND_IOMMUFD == _IO(IOMMUFD_TYPE, VFIO_CDEV_BASE + 18),
	       "VFIO_DEVICE_BIND_IOMMUFD");
_Static_assert(VFIO_CDEV_IOC_ATTACH_PT == _IO(IOMMUFD_TYPE, VFIO_CDEV_BASE + 19),
	       "VFIO_DEVICE_ATTACH_IOMMUFD_PT");
_Static_assert(VFIO_CDEV_IOC_DETACH_PT == _IO(IOMMUFD_TYPE, VFIO_CDEV_BASE + 20),
	       "VFIO_DEVICE_DETACH_IOMMUFD_PT");

_Static_assert(sizeof(struct iommufd_destroy) == 8, "iommu_destroy");
_Static_assert(offsetof(struct iommufd_destroy, id) == 4, "iommu_destroy.id");
_Static_assert(sizeof(struct iommufd_ioas_alloc) == 12, "iommu_ioas_alloc");
_Static_assert(offsetof(struct iommufd_ioas_alloc, flags) == 4, "iommu_ioas_alloc.flags");
_Static_assert(offsetof(struct iommufd_ioas_alloc, out_ioas_id) == 8, "ioas_alloc.out_ioas_id");
_Static_assert(sizeof(struct iommufd_iova_range) == 16, "iommu_iova_range");
_Static_assert(offsetof(struct iommufd_iova_range, last) == 8, "iommu_iova_range.last");
_Static_assert(sizeof(struct iommufd_ioas_iova_ranges) == 32, "iommu_ioas_iova_ranges");
_Static_assert(offsetof(struct iommufd_ioas_iova_ranges, ioas_id) == 4, "iova_ranges.ioas_id");
_Static_assert(offsetof(struct iommufd_ioas_iova_ranges, num_iovas) == 8, "iova_ranges.num");
_Static_assert(offsetof(struct iommufd_ioas_iova_ranges, allowed_iovas) == 16, "iova_ranges.ptr");
_Static_assert(offsetof(struct iommufd_ioas_iova_ranges, out_iova_alignment) == 24,
	       "iova_ranges.out_iova_alignment");
_Static_assert(sizeof(struct iommufd_ioas_map) == 40, "iommu_ioas_map");
_Static_assert(offsetof(struct iommufd_ioas_map, flags) == 4, "ioas_map.flags");
_Static_assert(offsetof(struct iommufd_ioas_map, ioas_id) == 8, "ioas_map.ioas_id");
_Static_assert(offsetof(struct iommufd_ioas_map, user_va) == 16, "ioas_map.user_va");
_Static_assert(offsetof(struct iommufd_ioas_map, length) == 24, "ioas_map.length");
_Static_assert(offsetof(struct iommufd_ioas_map, iova) == 32, "ioas_map.iova");
_Static_assert(sizeof(struct iommufd_ioas_unmap) == 24, "iommu_ioas_unmap");
_Static_assert(offsetof(struct iommufd_ioas_unmap, ioas_id) == 4, "ioas_unmap.ioas_id");
_Static_assert(offsetof(struct iommufd_ioas_unmap, iova) == 8, "ioas_unmap.iova");
_Static_assert(offsetof(struct iommufd_ioas_unmap, length) == 16, "ioas_unmap.length");
_Static_assert(sizeof(struct vfio_cdev_bind_iommufd) == 16, "vfio_device_bind_iommufd");
_Static_assert(offsetof(struct vfio_cdev_bind_iommufd, iommufd) == 8, "bind.iommufd");
_Static_assert(offsetof(struct vfio_cdev_bind_iommufd, out_devid) == 12, "bind.out_devid");
_Static_assert(sizeof(struct vfio_cdev_attach_pt) == 12, "vfio_device_attach_iommufd_pt");
_Static_assert(offsetof(struct vfio_cdev_attach_pt, pt_id) == 8, "attach.pt_id");
_Static_assert(sizeof(struct vfio_cdev_detach_pt) == 8, "vfio_device_detach_iommufd_pt");

#endif
