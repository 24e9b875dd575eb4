/* The user-space VFIO library (host-kmod/vfio/) without a VFIO device: PCI address parsing, the
 * region-info capability parser on built and hostile buffers, region range checks and mmap
 * areas on a file standing in for a device fd, and the errors a host without /dev/vfio gives. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/vfio.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "testutil.h"
#include "vfio/vfio.h"

static char err[256];

/* ---- PCI addresses ---- */

static void bdf_ok(const char *spec, const char *want)
{
	char bdf[16];

	err[0] = 0;
	ck_assert_msg(vfio_parse_bdf(spec, bdf, sizeof(bdf), err, sizeof(err)) == 0, "%s: %s", spec,
		      err);
	ck_assert_str_eq(bdf, want);
}

static void bdf_bad(const char *spec)
{
	char bdf[16];

	err[0] = 0;
	ck_assert_int_eq(vfio_parse_bdf(spec, bdf, sizeof(bdf), err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "not a PCI address"), "%s: message '%s'", spec, err);
}

START_TEST(test_bdf)
{
	char small[8];

	bdf_ok("0000:00:04.0", "0000:00:04.0");
	bdf_ok("00:04.0", "0000:00:04.0");
	bdf_ok("ABCD:EF:1f.7", "abcd:ef:1f.7");
	bdf_ok("/sys/bus/pci/devices/0000:3b:00.1", "0000:3b:00.1");
	bdf_ok("/sys/bus/pci/devices/0000:3b:00.1/", "0000:3b:00.1");
	bdf_bad("");
	bdf_bad("0000:00:20.0"); /* device 0x20 */
	bdf_bad("0000:00:04.8"); /* function 8 */
	bdf_bad("0000:00:04");
	bdf_bad("0000:00:04.00");
	bdf_bad("00000:00:04.0");
	bdf_bad("0000-00:04.0");
	bdf_bad("0000:0g:04.0");
	bdf_bad("/sys/bus/pci/devices/");
	bdf_bad("/sys/class/net/eth0");
	ck_assert_int_eq(vfio_parse_bdf(NULL, small, sizeof(small), err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(vfio_parse_bdf("00:04.0", small, sizeof(small), err, sizeof(err)),
			 -EINVAL);
	ck_assert_msg(strstr(err, "too small"), "%s", err);
}
END_TEST

/* ---- region info and its capability chain ---- */

static uint8_t info[1024];

/* A region info of size bytes at offset 1 << 40 with flags; no capabilities. */
static size_t info_plain(uint32_t index, uint32_t flags, uint64_t size)
{
	struct vfio_region_info ri = {.argsz = sizeof(ri),
				      .flags = flags,
				      .index = index,
				      .size = size,
				      .offset = 1ull << 40};

	memset(info, 0, sizeof(info));
	memcpy(info, &ri, sizeof(ri));
	return sizeof(ri);
}

static void put_cap(size_t off, uint16_t id, uint32_t next)
{
	struct vfio_info_cap_header h = {.id = id, .version = 1, .next = next};

	memcpy(info + off, &h, sizeof(h));
}

/* A sparse-mmap capability at off with n areas (offset, size pairs); its end. */
static size_t put_sparse(size_t off, uint32_t next, uint32_t n, const uint64_t *areas)
{
	uint32_t nr[2] = {n, 0};

	put_cap(off, VFIO_REGION_INFO_CAP_SPARSE_MMAP, next);
	memcpy(info + off + 8, nr, 8);
	memcpy(info + off + 16, areas, n * 16);
	return off + 16 + n * 16;
}

static void info_caps(uint32_t cap_offset, size_t len)
{
	struct vfio_region_info *ri = (void *)info;

	ri->flags |= VFIO_REGION_INFO_FLAG_CAPS;
	ri->cap_offset = cap_offset;
	ri->argsz = (uint32_t)len;
}

static struct vfio_region r;

static void parse_bad(size_t len, const char *what)
{
	err[0] = 0;
	ck_assert_int_eq(vfio_region_parse(&r, 0, info, len, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, what), "message '%s' lacks '%s'", err, what);
}

START_TEST(test_region_plain)
{
	size_t len = info_plain(2, VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_MMAP, 0x4000);

	ck_assert_int_eq(vfio_region_parse(&r, 2, info, len, err, sizeof(err)), 0);
	ck_assert_uint_eq(r.index, 2);
	ck_assert_uint_eq(r.size, 0x4000);
	ck_assert_uint_eq(r.offset, 1ull << 40);
	ck_assert_uint_eq(r.nsparse, 1);
	ck_assert_uint_eq(r.sparse[0].offset, 0);
	ck_assert_uint_eq(r.sparse[0].size, 0x4000);
	/* no MMAP flag: nothing mmap-able */
	len = info_plain(2, VFIO_REGION_INFO_FLAG_READ, 0x4000);
	ck_assert_int_eq(vfio_region_parse(&r, 2, info, len, err, sizeof(err)), 0);
	ck_assert_uint_eq(r.nsparse, 0);
	/* absent region */
	len = info_plain(5, 0, 0);
	ck_assert_int_eq(vfio_region_parse(&r, 5, info, len, err, sizeof(err)), 0);
	ck_assert_uint_eq(r.size, 0);
	ck_assert_uint_eq(r.nsparse, 0);
	/* answered for another index */
	len = info_plain(3, 0, 0x1000);
	ck_assert_int_eq(vfio_region_parse(&r, 2, info, len, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "index 3"), "%s", err);
	/* offset + size past what an off_t holds */
	len = info_plain(0, VFIO_REGION_INFO_FLAG_READ, 1ull << 63);
	parse_bad(len, "overflows");
	/* shorter than the struct */
	parse_bad(16, "info of 16 bytes");
	ck_assert_int_eq(vfio_region_parse(&r, 0, NULL, 64, err, sizeof(err)), -EINVAL);
}
END_TEST

START_TEST(test_region_sparse)
{
	/* BAR0 of 16 KiB with the MSI-X table page left out: [0, 0x2000) and [0x3000, 0x4000) */
	const uint64_t areas[] = {0, 0x2000, 0x3000, 0x1000, 0x3800, 0};
	size_t len = info_plain(0, VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_MMAP, 0x4000);

	/* an unknown capability first, then the sparse one */
	put_cap(len, 99, (uint32_t)len + 8);
	len = put_sparse(len + 8, 0, 3, areas);
	info_caps(sizeof(struct vfio_region_info), len);
	ck_assert_msg(vfio_region_parse(&r, 0, info, len, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(r.nsparse, 2); /* the empty area is dropped */
	ck_assert_uint_eq(r.sparse[0].size, 0x2000);
	ck_assert_uint_eq(r.sparse[1].offset, 0x3000);
	ck_assert_uint_eq(r.sparse[1].size, 0x1000);

	/* an argsz smaller than the buffer bounds the chain */
	((struct vfio_region_info *)info)->argsz = 40;
	parse_bad(len, "capability at 40");
	/* sparse with no MMAP flag: nothing mmap-able */
	info_caps(sizeof(struct vfio_region_info), len);
	((struct vfio_region_info *)info)->flags &= ~VFIO_REGION_INFO_FLAG_MMAP;
	ck_assert_int_eq(vfio_region_parse(&r, 0, info, len, err, sizeof(err)), 0);
	ck_assert_uint_eq(r.nsparse, 0);
}
END_TEST

START_TEST(test_region_hostile)
{
	uint64_t areas[2 * (VFIO_MAX_SPARSE + 2)];
	size_t base = info_plain(0, VFIO_REGION_INFO_FLAG_MMAP, 0x10000), len;

	/* capability offset inside the info struct, past the buffer, or its header past it */
	info_caps(8, base + 16);
	parse_bad(base + 16, "capability at 8");
	info_caps(4096, base + 16);
	parse_bad(base + 16, "capability at 4096");
	info_caps((uint32_t)base + 12, base + 16);
	parse_bad(base + 16, "outside");
	/* a chain that loops back, or points at itself */
	put_cap(base, 99, (uint32_t)base + 8);
	put_cap(base + 8, 99, (uint32_t)base);
	info_caps((uint32_t)base, base + 16);
	parse_bad(base + 16, "capability at 32");
	put_cap(base, 99, (uint32_t)base);
	parse_bad(base + 16, "capability at 32");
	/* more areas than the buffer holds (and a count whose bytes wrap 32 bits) */
	areas[0] = 0;
	areas[1] = 0x1000;
	len = put_sparse(base, 0, 1, areas);
	info_caps((uint32_t)base, len);
	ck_assert_int_eq(vfio_region_parse(&r, 0, info, len, err, sizeof(err)), 0);
	parse_bad(len - 1, "sparse-mmap");
	memcpy(info + base + 8, &(uint32_t){0x10000001u}, 4);
	parse_bad(len, "268435457 sparse-mmap areas");
	/* an area outside the region, or one whose offset + size wraps */
	areas[0] = 0xf000;
	areas[1] = 0x2000;
	len = put_sparse(base, 0, 1, areas);
	parse_bad(len, "outside its 0x10000 bytes");
	areas[0] = 0x1000;
	areas[1] = UINT64_MAX - 0x800;
	len = put_sparse(base, 0, 1, areas);
	parse_bad(len, "outside");
	/* two sparse capabilities */
	areas[0] = 0;
	areas[1] = 0x1000;
	len = put_sparse(base, (uint32_t)base + 32, 1, areas);
	len = put_sparse(len, 0, 1, areas);
	info_caps((uint32_t)base, len);
	parse_bad(len, "second sparse-mmap");
	/* more areas than kept: the first VFIO_MAX_SPARSE stay mmap-able */
	for (unsigned i = 0; i < VFIO_MAX_SPARSE + 2; i++) {
		areas[2 * i] = i * 0x1000ull;
		areas[2 * i + 1] = 0x1000;
	}
	len = put_sparse(base, 0, VFIO_MAX_SPARSE + 2, areas);
	info_caps((uint32_t)base, len);
	ck_assert_int_eq(vfio_region_parse(&r, 0, info, len, err, sizeof(err)), 0);
	ck_assert_uint_eq(r.nsparse, VFIO_MAX_SPARSE);
	ck_assert_uint_eq(r.sparse[VFIO_MAX_SPARSE - 1].offset, (VFIO_MAX_SPARSE - 1) * 0x1000ull);
}
END_TEST

/* ---- region access on a file standing in for the device fd ---- */

static char dir[64];
static struct vfio_device dev;
static long pg;

/* regions: 0 (BAR0) 4 pages RW, mmap-able [0, 1 page) and [2, 4 pages), at file offset 0;
 * 1 read-only 64 bytes at 4 pages + 64 (not page aligned); 7 (config) 256 bytes RW at 8 pages,
 * of which the file holds only 128. */
static void dev_setup(void)
{
	char path[128];
	uint8_t buf[256];
	int fd;

	pg = sysconf(_SC_PAGESIZE);
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-vfio-");
	snprintf(path, sizeof(path), "%s/dev", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)i;
	ck_assert_int_eq(pwrite(fd, buf, 64, 4 * pg + 64), 64);
	ck_assert_int_eq(pwrite(fd, buf, 128, 8 * pg), 128);
	ck_assert_int_eq(ftruncate(fd, 8 * pg + 128), 0);
	memset(&dev, 0, sizeof(dev));
	dev.fd = fd;
	dev.group = -1;
	snprintf(dev.name, sizeof(dev.name), "0000:00:04.0");
	dev.regions[0] = (struct vfio_region){
	    .index = 0,
	    .flags = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE |
		     VFIO_REGION_INFO_FLAG_MMAP,
	    .size = 4 * (uint64_t)pg,
	    .nsparse = 2,
	    .sparse = {{0, (uint64_t)pg}, {2 * (uint64_t)pg, 2 * (uint64_t)pg}},
	};
	dev.regions[1] = (struct vfio_region){
	    .index = 1, .flags = VFIO_REGION_INFO_FLAG_READ, .size = 64, .offset = 4 * pg + 64};
	dev.regions[VFIO_PCI_CONFIG_REGION_INDEX] =
	    (struct vfio_region){.index = VFIO_PCI_CONFIG_REGION_INDEX,
				 .flags = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE,
				 .size = 256,
				 .offset = 8 * (uint64_t)pg};
}

static void dev_teardown(void)
{
	close(dev.fd);
	testutil_rmtree(dir);
}

START_TEST(test_region_access)
{
	uint8_t b[16], w[4] = {0xde, 0xad, 0xbe, 0xef};

	ck_assert_int_eq(vfio_region_read(&dev, 1, 60, b, 4), 0);
	ck_assert_uint_eq(b[0], 60);
	ck_assert_uint_eq(b[3], 63);
	ck_assert_int_eq(vfio_region_read(&dev, 1, 61, b, 4), -ERANGE);
	ck_assert_int_eq(vfio_region_read(&dev, 1, UINT64_MAX - 1, b, 4), -ERANGE);
	ck_assert_int_eq(vfio_region_write(&dev, 1, 0, w, 4), -EACCES);
	ck_assert_int_eq(vfio_region_read(&dev, 2, 0, b, 4), -ENODEV);
	ck_assert_int_eq(vfio_region_read(&dev, VFIO_NREGIONS, 0, b, 4), -EINVAL);
	/* config space: a write lands at the region's offset; the file ends at 128: short is -EIO
	 */
	ck_assert_int_eq(vfio_cfg_write(&dev, 8, w, 4), 0);
	ck_assert_int_eq(vfio_cfg_read(&dev, 6, b, 6), 0);
	ck_assert_uint_eq(b[0], 6);
	ck_assert_uint_eq(b[2], 0xde);
	ck_assert_uint_eq(b[5], 0xef);
	ck_assert_int_eq(vfio_cfg_read(&dev, 124, b, 8), -EIO);
	ck_assert_int_eq(vfio_cfg_read(&dev, 250, b, 8), -ERANGE);
}
END_TEST

START_TEST(test_region_mmap)
{
	uint8_t *p;

	p = vfio_region_mmap(&dev, 0, 2 * (uint64_t)pg, 2 * (uint64_t)pg, PROT_READ | PROT_WRITE);
	ck_assert_ptr_nonnull(p);
	p[0] = 0x5a;
	munmap(p, 2 * pg);
	p = vfio_region_mmap(&dev, 0, 0, (uint64_t)pg, PROT_READ);
	ck_assert_ptr_nonnull(p);
	munmap(p, pg);
	/* across the hole between the areas, in the hole, or past the region */
	errno = 0;
	ck_assert_ptr_null(vfio_region_mmap(&dev, 0, 0, 2 * (uint64_t)pg, PROT_READ));
	ck_assert_int_eq(errno, EACCES);
	ck_assert_ptr_null(vfio_region_mmap(&dev, 0, (uint64_t)pg, (uint64_t)pg, PROT_READ));
	ck_assert_int_eq(errno, EACCES);
	ck_assert_ptr_null(
	    vfio_region_mmap(&dev, 0, 3 * (uint64_t)pg, 2 * (uint64_t)pg, PROT_READ));
	ck_assert_int_eq(errno, ERANGE);
	/* not page aligned, empty, or a region without MMAP */
	ck_assert_ptr_null(vfio_region_mmap(&dev, 0, 2 * (uint64_t)pg + 8, 64, PROT_READ));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(vfio_region_mmap(&dev, 0, 0, 0, PROT_READ));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(vfio_region_mmap(&dev, 1, 0, 64, PROT_READ));
	ck_assert_int_eq(errno, EACCES);
	/* what went through the mapping is in the file */
	uint8_t b;
	ck_assert_int_eq(vfio_region_read(&dev, 0, 2 * (uint64_t)pg, &b, 1), 0);
	ck_assert_uint_eq(b, 0x5a);
}
END_TEST

START_TEST(test_irq_reset_checks)
{
	int fds[2] = {-1, -1};

	dev.irqs[VFIO_PCI_MSIX_IRQ_INDEX] = (struct vfio_irq_type){VFIO_IRQ_INFO_EVENTFD, 2};
	ck_assert_int_eq(vfio_irq_set(&dev, VFIO_PCI_MSIX_IRQ_INDEX, 1, 2, fds), -ERANGE);
	ck_assert_int_eq(vfio_irq_set(&dev, VFIO_PCI_MSIX_IRQ_INDEX, 3, 1, fds), -ERANGE);
	ck_assert_int_eq(vfio_irq_set(&dev, VFIO_PCI_MSI_IRQ_INDEX, 0, 1, fds), -EINVAL);
	ck_assert_int_eq(vfio_irq_set(&dev, VFIO_NIRQS, 0, 1, fds), -EINVAL);
	ck_assert_int_eq(vfio_irq_set(&dev, VFIO_PCI_MSIX_IRQ_INDEX, 0, 1, NULL), -EINVAL);
	ck_assert_int_eq(vfio_intx_unmask(&dev), -EINVAL); /* the device has no INTx */
	/* a file is no device: the kernel's answer comes back as is */
	ck_assert_int_eq(vfio_irq_set(&dev, VFIO_PCI_MSIX_IRQ_INDEX, 0, 2, fds), -ENOTTY);
	ck_assert_int_eq(vfio_device_reset(&dev), -ENOTTY); /* no VFIO_DEVICE_FLAGS_RESET */
	dev.flags = VFIO_DEVICE_FLAGS_RESET;
	ck_assert_int_eq(vfio_device_reset(&dev), -ENOTTY);
}
END_TEST

/* ---- a host without VFIO ---- */

START_TEST(test_no_vfio)
{
	struct vfio_container c;
	struct vfio_device d;
	char page[64] __attribute__((aligned(64)));

	if (access("/dev/vfio/vfio", F_OK) == 0) {
		testutil_skip("test_no_vfio: this host has /dev/vfio/vfio");
		return;
	}
	err[0] = 0;
	ck_assert_int_lt(vfio_container_open(&c, true, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "/dev/vfio/vfio"), "%s", err);
	ck_assert_int_eq(c.fd, -1);
	vfio_container_close(&c); /* harmless on a container that never opened */

	/* a container struct that is not open, and ones with fake state */
	ck_assert_int_eq(vfio_device_open(&c, "0000:00:04.0", &d, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "0000:00:04.0: the container is not open"), "%s", err);
	ck_assert_int_eq(vfio_device_open(&c, "nonsense", &d, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(d.fd, -1);
	c.fd = open("/dev/null", O_RDWR);
	ck_assert_int_eq(vfio_device_open(&c, "ffff:ff:1f.7", &d, err, sizeof(err)), -ENOENT);
	ck_assert_msg(strstr(err, "ffff:ff:1f.7: no such PCI device"), "%s", err);
	ck_assert_int_eq(vfio_dma_map(&c, 0, 4096, page, true, err, sizeof(err)), -ENODEV);
	ck_assert_msg(strstr(err, "no IOMMU yet"), "%s", err);
	c.backend = VFIO_BACKEND_NOIOMMU;
	ck_assert_int_eq(vfio_dma_map(&c, 0, 4096, page, true, err, sizeof(err)), -EOPNOTSUPP);
	ck_assert_int_eq(vfio_dma_unmap(&c, 0, 4096), -EOPNOTSUPP);
	c.backend = VFIO_BACKEND_TYPE1;
	ck_assert_int_eq(vfio_dma_map(&c, 4096, 100, page, true, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "not page aligned"), "%s", err);
	ck_assert_int_eq(vfio_dma_unmap(&c, UINT64_MAX - 4095, 8192), -EINVAL);
	vfio_container_close(&c);
	ck_assert_int_eq(c.fd, -1);
}
END_TEST

/* A PCI device of this host, if any, without an IOMMU group: the error says how to get one. */
START_TEST(test_no_group)
{
	struct vfio_container c = {.fd = -1};
	struct vfio_device d;
	char bdf[64] = "", *out = NULL;

	if (testutil_sh("for d in /sys/bus/pci/devices/*; do [ -e $d/iommu_group ] || "
			"{ echo ${d##*/}; break; }; done",
			&out) != 0 ||
	    !out || sscanf(out, "%63s", bdf) != 1) {
		free(out);
		testutil_skip("test_no_group: every PCI device here has an IOMMU group");
		return;
	}
	free(out);
	for (unsigned i = 0; i < VFIO_MAX_GROUPS; i++)
		c.groups[i].fd = -1;
	c.fd = open("/dev/null", O_RDWR);
	ck_assert_int_eq(vfio_device_open(&c, bdf, &d, err, sizeof(err)), -ENODEV);
	ck_assert_msg(strstr(err, "no IOMMU group: bind it to vfio-pci"), "%s", err);
	ck_assert_uint_eq(c.ngroups, 0);
	vfio_container_close(&c);
}
END_TEST

START_TEST(test_virt_to_phys)
{
	uint8_t *p = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t phys = 0;
	int rc;

	ck_assert_ptr_ne(p, MAP_FAILED);
	/* never touched: no frame behind it */
	ck_assert_int_eq(vfio_virt_to_phys(p + pg, &phys), -EFAULT);
	p[0] = 1;
	rc = vfio_virt_to_phys(p + 123, &phys);
	if (rc == -EPERM) {
		munmap(p, 2 * pg);
		testutil_skip("test_virt_to_phys: frame numbers need CAP_SYS_ADMIN");
		return;
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(phys % (uint64_t)pg, 123);
	ck_assert_uint_ne(phys / (uint64_t)pg, 0);
	munmap(p, 2 * pg);
}
END_TEST

START_TEST(test_virt_to_phys_range)
{
	enum { N = 8 };
	uint8_t *p =
	    mmap(NULL, (N + 1) * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t phys[N + 1], one;
	int rc;

	ck_assert_ptr_ne(p, MAP_FAILED);
	/* the arguments, before pagemap is opened */
	ck_assert_int_eq(vfio_virt_to_phys_range(NULL, 1, phys), -EINVAL);
	ck_assert_int_eq(vfio_virt_to_phys_range(p, 1, NULL), -EINVAL);
	ck_assert_int_eq(vfio_virt_to_phys_range(p, 0, phys), -EINVAL);
	ck_assert_int_eq(vfio_virt_to_phys_range(p + 1, 1, phys), -EINVAL);
	ck_assert_int_eq(vfio_virt_to_phys_range(p, SIZE_MAX, phys), -EINVAL);
	ck_assert_int_eq(
	    vfio_virt_to_phys_range((void *)(UINTPTR_MAX - (uintptr_t)pg + 1), 2, phys), -EINVAL);
	/* the last page never touched: the range fails as a whole */
	for (unsigned i = 0; i < N; i++)
		p[i * pg] = (uint8_t)i;
	ck_assert_int_eq(vfio_virt_to_phys_range(p, N + 1, phys), -EFAULT);
	ck_assert_int_eq(mlock(p, N * pg), 0);
	rc = vfio_virt_to_phys_range(p, N, phys);
	if (rc == -EPERM) {
		munlock(p, N * pg);
		munmap(p, (N + 1) * pg);
		testutil_skip("test_virt_to_phys_range: frame numbers need CAP_SYS_ADMIN");
		return;
	}
	ck_assert_int_eq(rc, 0);
	/* locked pages: non-zero distinct frames, each the one the single-page call gives */
	for (unsigned i = 0; i < N; i++) {
		ck_assert_uint_ne(phys[i] / (uint64_t)pg, 0);
		ck_assert_uint_eq(phys[i] % (uint64_t)pg, 0);
		for (unsigned j = 0; j < i; j++)
			ck_assert_uint_ne(phys[i], phys[j]);
		ck_assert_int_eq(vfio_virt_to_phys(p + i * pg + 5, &one), 0);
		ck_assert_uint_eq(one, phys[i] + 5);
	}
	munlock(p, N * pg);
	munmap(p, (N + 1) * pg);
}
END_TEST

static Suite *vfio_suite(void)
{
	Suite *s = suite_create("vfio");
	TCase *tc = tcase_create("parse");
	TCase *dv = tcase_create("device");

	tcase_add_test(tc, test_bdf);
	tcase_add_test(tc, test_region_plain);
	tcase_add_test(tc, test_region_sparse);
	tcase_add_test(tc, test_region_hostile);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(dv, dev_setup, dev_teardown);
	tcase_add_test(dv, test_region_access);
	tcase_add_test(dv, test_region_mmap);
	tcase_add_test(dv, test_irq_reset_checks);
	tcase_add_test(dv, test_no_vfio);
	tcase_add_test(dv, test_no_group);
	tcase_add_test(dv, test_virt_to_phys);
	tcase_add_test(dv, test_virt_to_phys_range);
	suite_add_tcase(s, dv);
	return s;
}

int main(void)
{
	return testutil_run_suite(vfio_suite());
}
