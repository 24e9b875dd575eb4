/* The VFIO library's iommufd backend against a fake kernel that checks every argument (sizes,
 * flags, IOAS ids, IOVA = GPA) and the order of the calls, failing each step in turn; and the
 * choice between iommufd and the legacy container over a fake sysfs and /dev in a temp dir. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "vfio/iommufd_uapi.h"
#include "vfio/vfio.h"

#define FD_IOMMU 1000
#define FD_CDEV	 1001
#define IOAS_ID	 7
#define DEVID	 42

static char root[256], err[256];
static char calls[2048];      /* the fake kernel's log: "open:iommu alloc bind ..." */
static const char *fail_step; /* the step that fails, with fail_errno */
static int fail_errno;
static unsigned nopen;	     /* fds the fake kernel holds open */
static unsigned nranges = 1; /* IOVA ranges the kernel answers */
static struct iommufd_iova_range ranges[2] = {{0, (1ull << 48) - 1}, {0, 0}};
static bool move_iova;	     /* a kernel that maps FIXED_IOVA elsewhere */
static uint64_t unmap_short; /* bytes an unmap leaves mapped */
static bool bound, attached;
static uint64_t mapped_iova, mapped_len;

static void logc(const char *s)
{
	strncat(calls, s, sizeof(calls) - strlen(calls) - 2);
	strcat(calls, " ");
}

static bool fails(const char *step)
{
	if (fail_step && !strcmp(fail_step, step)) {
		errno = fail_errno;
		return true;
	}
	return false;
}

static int fake_open(const char *path, int flags)
{
	char want[512];

	ck_assert_int_eq(flags, O_RDWR | O_CLOEXEC);
	snprintf(want, sizeof(want), "%s/dev/iommu", root);
	if (!strcmp(path, want)) {
		logc("open:iommu");
		if (fails("open:iommu"))
			return -1;
		nopen++;
		return FD_IOMMU;
	}
	snprintf(want, sizeof(want), "%s/dev/vfio/devices/vfio3", root);
	ck_assert_str_eq(path, want);
	logc("open:cdev");
	if (fails("open:cdev"))
		return -1;
	nopen++;
	return FD_CDEV;
}

static int fake_close(int fd)
{
	ck_assert(fd == FD_IOMMU || fd == FD_CDEV);
	ck_assert_uint_gt(nopen, 0);
	nopen--;
	if (fd == FD_CDEV) {
		ck_assert(!attached); /* detached before the cdev goes */
		bound = false;
		logc("close:cdev");
	} else {
		ck_assert(!bound); /* devices released before the iommufd */
		logc("close:iommu");
	}
	return 0;
}

static int fake_ioctl(int fd, unsigned long req, void *arg)
{
	switch (req) {
	case IOMMUFD_IOC_IOAS_ALLOC: {
		struct iommufd_ioas_alloc *a = arg;

		ck_assert_int_eq(fd, FD_IOMMU);
		ck_assert_uint_eq(a->size, 12);
		ck_assert_uint_eq(a->flags, 0);
		logc("alloc");
		if (fails("alloc"))
			return -1;
		a->out_ioas_id = IOAS_ID;
		return 0;
	}
	case IOMMUFD_IOC_DESTROY: {
		struct iommufd_destroy *d = arg;

		ck_assert_int_eq(fd, FD_IOMMU);
		ck_assert_uint_eq(d->size, 8);
		ck_assert_uint_eq(d->id, IOAS_ID);
		ck_assert(!attached);
		logc("destroy");
		return 0;
	}
	case VFIO_CDEV_IOC_BIND_IOMMUFD: {
		struct vfio_cdev_bind_iommufd *b = arg;

		ck_assert_int_eq(fd, FD_CDEV);
		ck_assert_uint_eq(b->argsz, 16);
		ck_assert_uint_eq(b->flags, 0);
		ck_assert_int_eq(b->iommufd, FD_IOMMU);
		ck_assert(!bound);
		logc("bind");
		if (fails("bind"))
			return -1;
		bound = true;
		b->out_devid = DEVID;
		return 0;
	}
	case VFIO_CDEV_IOC_ATTACH_PT: {
		struct vfio_cdev_attach_pt *a = arg;

		ck_assert_int_eq(fd, FD_CDEV);
		ck_assert_uint_eq(a->argsz, 12);
		ck_assert_uint_eq(a->flags, 0);
		ck_assert_uint_eq(a->pt_id, IOAS_ID);
		ck_assert(bound); /* bind, then attach */
		logc("attach");
		if (fails("attach"))
			return -1;
		attached = true;
		return 0;
	}
	case VFIO_CDEV_IOC_DETACH_PT: {
		struct vfio_cdev_detach_pt *d = arg;

		ck_assert_int_eq(fd, FD_CDEV);
		ck_assert_uint_eq(d->argsz, 8);
		ck_assert_uint_eq(d->flags, 0);
		ck_assert(attached);
		logc("detach");
		attached = false;
		return 0;
	}
	case IOMMUFD_IOC_IOAS_IOVA_RANGES: {
		struct iommufd_ioas_iova_ranges *q = arg;
		struct iommufd_iova_range *r = (void *)(uintptr_t)q->allowed_iovas;

		ck_assert_int_eq(fd, FD_IOMMU);
		ck_assert_uint_eq(q->size, 32);
		ck_assert_uint_eq(q->ioas_id, IOAS_ID);
		ck_assert_uint_gt(q->num_iovas, 0);
		ck_assert_ptr_nonnull(r);
		logc("ranges");
		if (fails("ranges"))
			return -1;
		if (nranges > q->num_iovas && nranges < 1000) {
			q->num_iovas = nranges;
			errno = EMSGSIZE;
			return -1;
		}
		for (unsigned i = 0; i < nranges && i < 2; i++)
			r[i] = ranges[i];
		q->num_iovas = nranges; /* >= 1000: a lying kernel */
		q->out_iova_alignment = 4096;
		return 0;
	}
	case IOMMUFD_IOC_IOAS_MAP: {
		struct iommufd_ioas_map *m = arg;

		ck_assert_int_eq(fd, FD_IOMMU);
		ck_assert_uint_eq(m->size, 40);
		ck_assert_uint_eq(m->ioas_id, IOAS_ID);
		ck_assert_uint_eq(m->reserved, 0);
		ck_assert_uint_eq(m->flags, IOMMUFD_MAP_FIXED_IOVA | IOMMUFD_MAP_READABLE |
						IOMMUFD_MAP_WRITEABLE);
		ck_assert_uint_ne(m->user_va, 0);
		logc("map");
		if (fails("map"))
			return -1;
		if (move_iova)
			m->iova += 0x100000;
		mapped_iova = m->iova;
		mapped_len = m->length;
		return 0;
	}
	case IOMMUFD_IOC_IOAS_UNMAP: {
		struct iommufd_ioas_unmap *u = arg;

		ck_assert_int_eq(fd, FD_IOMMU);
		ck_assert_uint_eq(u->size, 24);
		ck_assert_uint_eq(u->ioas_id, IOAS_ID);
		ck_assert_uint_eq(u->iova, mapped_iova);
		logc("unmap");
		if (fails("unmap"))
			return -1;
		u->length -= unmap_short;
		mapped_len = 0;
		return 0;
	}
	}
	ck_abort_msg("fake kernel: unexpected ioctl %#lx on fd %d", req, fd);
	return -1;
}

static struct vfio_sys fake_sys = {.open = fake_open, .ioctl = fake_ioctl, .close = fake_close};
static char sysfs[300], dev[300];

static void mkpath(const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s%s", root, rel);
	ck_assert_msg(!mkdir(p, 0755) || errno == EEXIST, "mkdir %s", p);
}

static void touch(const char *rel)
{
	char p[512];
	int fd;

	snprintf(p, sizeof(p), "%s%s", root, rel);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

/* A host with iommufd: /dev/iommu, /dev/vfio/devices/vfio3, and 0000:00:04.0's vfio-dev/vfio3. */
static void setup(void)
{
	static const char *dirs[] = {"/dev",
				     "/dev/vfio",
				     "/dev/vfio/devices",
				     "/sys",
				     "/sys/bus",
				     "/sys/bus/pci",
				     "/sys/bus/pci/devices",
				     "/sys/bus/pci/devices/0000:00:04.0",
				     "/sys/bus/pci/devices/0000:00:04.0/vfio-dev",
				     "/sys/bus/pci/devices/0000:00:04.0/vfio-dev/vfio3",
				     "/sys/bus/pci/devices/0000:00:05.0"};

	snprintf(root, sizeof(root), "/tmp/lvmm-iommufd-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	for (unsigned i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		mkpath(dirs[i]);
	touch("/dev/iommu");
	touch("/dev/vfio/devices/vfio3");
	snprintf(sysfs, sizeof(sysfs), "%s/sys", root);
	snprintf(dev, sizeof(dev), "%s/dev", root);
	fake_sys.sysfs = sysfs;
	fake_sys.dev = dev;
	vfio_sys = &fake_sys;
	unsetenv("LVMM_VFIO_BACKEND");
	calls[0] = err[0] = 0;
	fail_step = NULL;
	fail_errno = 0;
	nopen = 0;
	nranges = 1;
	ranges[0].start = 0;
	ranges[0].last = (1ull << 48) - 1;
	move_iova = false;
	unmap_short = 0;
	bound = attached = false;
	mapped_iova = mapped_len = 0;
}

static void teardown(void)
{
	char cmd[400];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
	unsetenv("LVMM_VFIO_BACKEND");
}

static void rm(const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s%s", root, rel);
	ck_assert_int_eq(remove(p), 0);
}

START_TEST(test_choose)
{
	ck_assert_int_eq(vfio_backend_choose(NULL, false), VFIO_BACKEND_IOMMUFD);
	ck_assert_int_eq(vfio_backend_choose("0000:00:04.0", false), VFIO_BACKEND_IOMMUFD);
	/* a device without a cdev, or no-IOMMU allowed: the legacy container */
	ck_assert_int_eq(vfio_backend_choose("0000:00:05.0", false), VFIO_BACKEND_TYPE1);
	ck_assert_int_eq(vfio_backend_choose("0000:00:09.0", false), VFIO_BACKEND_TYPE1);
	ck_assert_int_eq(vfio_backend_choose("0000:00:04.0", true), VFIO_BACKEND_TYPE1);
	/* the overrides */
	setenv("LVMM_VFIO_BACKEND", "legacy", 1);
	ck_assert_int_eq(vfio_backend_choose("0000:00:04.0", false), VFIO_BACKEND_TYPE1);
	setenv("LVMM_VFIO_BACKEND", "iommufd", 1);
	ck_assert_int_eq(vfio_backend_choose("0000:00:05.0", true), VFIO_BACKEND_IOMMUFD);
	/* a value that is neither: the container refuses it, naming it */
	setenv("LVMM_VFIO_BACKEND", "iommu", 1);
	{
		struct vfio_container c;

		ck_assert_int_eq(vfio_container_open(&c, false, err, sizeof(err)), -EINVAL);
		ck_assert_msg(strstr(err, "LVMM_VFIO_BACKEND=iommu:"), "error: %s", err);
		ck_assert_int_eq(c.fd, -1);
	}
	unsetenv("LVMM_VFIO_BACKEND");
	/* a cdev name that is not vfioN does not count */
	mkpath("/sys/bus/pci/devices/0000:00:05.0/vfio-dev");
	mkpath("/sys/bus/pci/devices/0000:00:05.0/vfio-dev/vfiox");
	ck_assert_int_eq(vfio_backend_choose("0000:00:05.0", false), VFIO_BACKEND_TYPE1);
	/* a 6.1 host: no /dev/vfio/devices, then no /dev/iommu */
	rm("/dev/vfio/devices/vfio3");
	rm("/dev/vfio/devices");
	ck_assert_int_eq(vfio_backend_choose(NULL, false), VFIO_BACKEND_TYPE1);
	mkpath("/dev/vfio/devices");
	rm("/dev/iommu");
	ck_assert_int_eq(vfio_backend_choose(NULL, false), VFIO_BACKEND_TYPE1);
	ck_assert_int_eq(vfio_backend_choose("0000:00:04.0", false), VFIO_BACKEND_TYPE1);
}
END_TEST

static char ram[2 * 4096] __attribute__((aligned(4096)));

/* The whole life: open, bind, attach, map at IOVA = GPA, unmap, release, close, in order. */
START_TEST(test_life)
{
	struct vfio_container c;
	int fd;

	ck_assert_int_eq(vfio_container_open(&c, false, err, sizeof(err)), 0);
	ck_assert_int_eq(c.backend, VFIO_BACKEND_IOMMUFD);
	ck_assert_uint_eq(c.ioas, IOAS_ID);
	ck_assert_int_eq(c.fd, FD_IOMMU);
	ck_assert_int_eq(vfio_iommufd_device_bind(&c, "0000:00:04.0", &fd, err, sizeof(err)), 0);
	ck_assert_int_eq(fd, FD_CDEV);
	ck_assert(bound && attached);
	ck_assert_int_eq(vfio_dma_map(&c, 0x100000, sizeof(ram), ram, true, err, sizeof(err)), 0);
	ck_assert_uint_eq(mapped_iova, 0x100000);
	ck_assert_uint_eq(mapped_len, sizeof(ram));
	/* memory removed: unmapped at the same IOVA */
	ck_assert_int_eq(vfio_dma_unmap(&c, 0x100000, sizeof(ram)), 0);
	ck_assert_uint_eq(mapped_len, 0);
	/* remapped */
	ck_assert_int_eq(vfio_dma_map(&c, 0x200000, 4096, ram, true, err, sizeof(err)), 0);
	ck_assert_uint_eq(mapped_iova, 0x200000);
	unmap_short = 4096;
	ck_assert_int_eq(vfio_dma_unmap(&c, 0x200000, 8192), -ENOENT);
	vfio_iommufd_device_release(fd);
	vfio_container_close(&c);
	ck_assert_int_eq(c.backend, VFIO_BACKEND_NONE);
	ck_assert_int_eq(c.fd, -1);
	ck_assert_str_eq(calls, "open:iommu alloc open:cdev bind attach ranges map unmap ranges "
				"map unmap detach close:cdev destroy close:iommu ");
	ck_assert_uint_eq(nopen, 0);
}
END_TEST

START_TEST(test_map_checks)
{
	struct vfio_container c;

	ck_assert_int_eq(vfio_container_open(&c, false, err, sizeof(err)), 0);
	/* unaligned or wrapping: refused before the kernel */
	ck_assert_int_eq(vfio_dma_map(&c, 0x100001, 4096, ram, true, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(vfio_dma_map(&c, ~0xfffull, 8192, ram, true, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(vfio_dma_unmap(&c, 0x100001, 4096), -EINVAL);
	/* guest RAM above the IOMMU's aperture */
	ranges[0].last = 0xfffff;
	ck_assert_int_eq(vfio_dma_map(&c, 0x100000, 4096, ram, true, err, sizeof(err)), -ERANGE);
	ck_assert_msg(strstr(err, "0x100000-0x100fff") && strstr(err, "IOAS 7"), "%s", err);
	/* a hole: the second range holds it */
	nranges = 2;
	ranges[1].start = 0x200000;
	ranges[1].last = 0x2fffff;
	ck_assert_int_eq(vfio_dma_map(&c, 0x200000, 4096, ram, true, err, sizeof(err)), 0);
	ck_assert_int_eq(vfio_dma_map(&c, 0x2ff000, 8192, ram, true, err, sizeof(err)), -ERANGE);
	/* hostile replies: more ranges than asked for, in either form */
	nranges = 500;
	ck_assert_int_eq(vfio_dma_map(&c, 0x200000, 4096, ram, true, err, sizeof(err)), -EMSGSIZE);
	ck_assert_msg(strstr(err, "500"), "%s", err);
	nranges = 5000;
	ck_assert_int_eq(vfio_dma_map(&c, 0x200000, 4096, ram, true, err, sizeof(err)), -EPROTO);
	nranges = 0;
	ck_assert_int_eq(vfio_dma_map(&c, 0x200000, 4096, ram, true, err, sizeof(err)), -ERANGE);
	/* FIXED_IOVA moved by the kernel: undone and refused */
	nranges = 1;
	ranges[0].last = ~0ull;
	move_iova = true;
	calls[0] = 0;
	ck_assert_int_eq(vfio_dma_map(&c, 0x200000, 4096, ram, true, err, sizeof(err)), -EPROTO);
	ck_assert_str_eq(calls, "ranges map unmap ");
	vfio_container_close(&c);
	ck_assert_uint_eq(nopen, 0);
}
END_TEST

/* Each step failing: the error names the object, and what was done is undone. */
START_TEST(test_failures)
{
	static const struct {
		const char *step;
		int rc;
		const char *says, *log;
	} t[] = {
	    {"open:iommu", -EACCES, "/dev/iommu", "open:iommu "},
	    {"alloc", -ENOMEM, "IOAS alloc", "open:iommu alloc close:iommu "},
	    {"open:cdev", -EBUSY, "vfio3", "open:cdev "},
	    {"bind", -EPERM, "bind", "open:cdev bind close:cdev "},
	    {"attach", -EINVAL, "attach to IOAS 7", "open:cdev bind attach close:cdev "},
	    {"ranges", -EFAULT, "IOVA ranges of IOAS 7", "ranges "},
	    {"map", -ENOMEM, "IOAS 7 map iova 0x100000", "ranges map "},
	};

	for (unsigned i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct vfio_container c;
		int fd = -1, rc;

		calls[0] = err[0] = 0;
		fail_step = NULL;
		if (i >= 2) {
			ck_assert_int_eq(vfio_container_open(&c, false, err, sizeof(err)), 0);
			calls[0] = 0;
		}
		fail_step = t[i].step;
		fail_errno = -t[i].rc;
		if (i < 2)
			rc = vfio_container_open(&c, false, err, sizeof(err));
		else if (i < 5)
			rc = vfio_iommufd_device_bind(&c, "0000:00:04.0", &fd, err, sizeof(err));
		else
			rc = vfio_dma_map(&c, 0x100000, 4096, ram, true, err, sizeof(err));
		ck_assert_msg(rc == t[i].rc, "%s: %d", t[i].step, rc);
		ck_assert_msg(strstr(err, t[i].says), "%s: %s", t[i].step, err);
		ck_assert_str_eq(calls, t[i].log);
		ck_assert_int_eq(fd, -1);
		ck_assert(!bound && !attached);
		if (i < 2) {
			ck_assert_int_eq(c.fd, -1);
			ck_assert_uint_eq(nopen, 0);
		} else {
			ck_assert_uint_eq(nopen, 1);
			fail_step = NULL;
			vfio_container_close(&c);
			ck_assert_uint_eq(nopen, 0);
		}
	}
	/* a device without a cdev in an iommufd container: its name and the way out */
	{
		struct vfio_container c;
		int fd;

		ck_assert_int_eq(vfio_container_open(&c, false, err, sizeof(err)), 0);
		ck_assert_int_eq(
		    vfio_iommufd_device_bind(&c, "0000:00:05.0", &fd, err, sizeof(err)), -ENODEV);
		ck_assert_msg(strstr(err, "0000:00:05.0") &&
				  strstr(err, "LVMM_VFIO_BACKEND=legacy"),
			      "%s", err);
		vfio_container_close(&c);
	}
	ck_assert_uint_eq(nopen, 0);
}
END_TEST

/* Forced legacy on an iommufd host: the legacy path, as on 6.1 (no /dev/vfio/vfio here). */
START_TEST(test_legacy_forced)
{
	struct vfio_container c;

	vfio_sys = &fake_sys;
	setenv("LVMM_VFIO_BACKEND", "legacy", 1);
	if (!access("/dev/vfio/vfio", F_OK))
		return; /* a host with VFIO: nothing to assert about its answer */
	ck_assert_int_lt(vfio_container_open(&c, false, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "/dev/vfio/vfio"), "%s", err);
	ck_assert_str_eq(calls, "");
}
END_TEST

static Suite *iommufd_suite(void)
{
	Suite *s = suite_create("vfio_iommufd");
	TCase *tc = tcase_create("fake");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_choose);
	tcase_add_test(tc, test_life);
	tcase_add_test(tc, test_map_checks);
	tcase_add_test(tc, test_failures);
	tcase_add_test(tc, test_legacy_forced);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(iommufd_suite());
}
