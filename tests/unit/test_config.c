/* Unit tests for vmm/config.c: size suffixes, --vnvme syntaxes and every rejection, and the
 * whole-config validation rules, each error checked for naming the offending value. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "lightiov/size.h"
#include "testutil.h"

static char err[512];

static uint64_t size_ok(const char *s)
{
	uint64_t v = 12345;

	err[0] = 0;
	ck_assert_msg(config_parse_size(s, &v, err, sizeof(err)) == 0, "'%s': %s", s, err);
	return v;
}

static void size_bad(const char *s, const char *want)
{
	uint64_t v = 777;

	err[0] = 0;
	ck_assert_int_eq(config_parse_size(s, &v, err, sizeof(err)), -EINVAL);
	ck_assert_uint_eq(v, 777);
	ck_assert_msg(strstr(err, want), "'%s': message '%s' lacks '%s'", s ? s : "(null)", err,
		      want);
}

START_TEST(size_valid)
{
	ck_assert_uint_eq(size_ok("0"), 0);
	ck_assert_uint_eq(size_ok("1048576"), 1048576);
	ck_assert_uint_eq(size_ok("4k"), 4096);
	ck_assert_uint_eq(size_ok("4K"), 4096);
	ck_assert_uint_eq(size_ok("512M"), 512ULL << 20);
	ck_assert_uint_eq(size_ok("512m"), 512ULL << 20);
	ck_assert_uint_eq(size_ok("2G"), 2ULL << 30);
	ck_assert_uint_eq(size_ok("3t"), 3ULL << 40);
	ck_assert_uint_eq(size_ok("1KiB"), 1024);
	ck_assert_uint_eq(size_ok("1MB"), 1ULL << 20);
	ck_assert_uint_eq(size_ok("18446744073709551615"), UINT64_MAX);
	ck_assert_uint_eq(size_ok("16777215T"), 16777215ULL << 40);
}
END_TEST

START_TEST(size_invalid)
{
	size_bad("", "empty");
	size_bad(NULL, "empty");
	size_bad("12Q", "'12Q' has an unknown suffix");
	size_bad("-1", "'-1' is not a size");
	size_bad("+1", "'+1' is not a size");
	size_bad(" 1", "' 1' is not a size");
	size_bad("M", "'M' is not a size");
	size_bad("1MM", "'1MM' has trailing");
	size_bad("1 M", "unknown suffix");
	size_bad("1.5G", "unknown suffix");
	size_bad("18446744073709551616", "too large");
	size_bad("16777216T", "too large");
	size_bad("99999999999999999999999", "too large");
}
END_TEST

/* Bounded decimal counts (--cpus, queues=): digits only, inside the bounds. */
START_TEST(count_parsing)
{
	unsigned n = 7;

	ck_assert_int_eq(config_parse_count("1", 1, 64, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(config_parse_count("64", 1, 64, &n), 0);
	ck_assert_uint_eq(n, 64);
	ck_assert_int_eq(config_parse_count("0", 1, 64, &n), -EINVAL);
	ck_assert_int_eq(config_parse_count("65", 1, 64, &n), -EINVAL);
	ck_assert_int_eq(config_parse_count("", 1, 64, &n), -EINVAL);
	ck_assert_int_eq(config_parse_count("-1", 1, 64, &n), -EINVAL);
	ck_assert_int_eq(config_parse_count("+4", 1, 64, &n), -EINVAL);
	ck_assert_int_eq(config_parse_count("4x", 1, 64, &n), -EINVAL);
	ck_assert_int_eq(config_parse_count("99999999999999999999", 1, 64, &n), -EINVAL);
	ck_assert_int_eq(config_parse_count(" 4", 1, 64, &n), -EINVAL);
	ck_assert_uint_eq(n, 64); /* untouched by a refusal */
}
END_TEST

/* The parser softssd's command line and lvmm's configuration share (host-kmod/common/size.c):
 * the reasons it gives, and no blanks or signs that strtoull would take. */
START_TEST(shared_size_parser)
{
	uint64_t v = 5;

	ck_assert_int_eq(lio_size_parse("4KiB", &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(lio_size_parse("16T", &v), 0);
	ck_assert_uint_eq(v, 16ULL << 40);
	ck_assert_int_eq(lio_size_parse("", &v), -LIO_SIZE_EMPTY);
	ck_assert_int_eq(lio_size_parse(" 4K", &v), -LIO_SIZE_NOT_DIGITS);
	ck_assert_int_eq(lio_size_parse("-1", &v), -LIO_SIZE_NOT_DIGITS);
	ck_assert_int_eq(lio_size_parse("4X", &v), -LIO_SIZE_SUFFIX);
	ck_assert_int_eq(lio_size_parse("4KBx", &v), -LIO_SIZE_TRAILING);
	ck_assert_int_eq(lio_size_parse("16777216T", &v), -LIO_SIZE_TOO_LARGE);
	ck_assert_int_eq(lio_size_parse("18446744073709551616", &v), -LIO_SIZE_TOO_LARGE);
	ck_assert_uint_eq(v, 16ULL << 40); /* untouched by a refusal */
	ck_assert_str_eq(lio_size_why(-LIO_SIZE_SUFFIX),
			 "has an unknown suffix (use K, M, G or T)");
	ck_assert_int_eq(lio_count_parse("4096", 1, 4096, &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(lio_count_parse("4097", 1, 4096, &v), -LIO_SIZE_TOO_LARGE);
	ck_assert_int_eq(lio_count_parse("12k", 1, 1u << 20, &v), -LIO_SIZE_TRAILING);
	ck_assert_int_eq(config_parse_size("4X", &v, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "'4X' has an unknown suffix (use K, M, G or T)");
}
END_TEST

START_TEST(vnvme_file_form)
{
	struct vnvme_config v;

	ck_assert_int_eq(config_parse_vnvme("file=/tmp/disk.img", &v, err, sizeof(err)), 0);
	ck_assert_str_eq(v.path, "/tmp/disk.img");
	ck_assert_str_eq(v.ssd, "");
	ck_assert_uint_eq(v.size, 0);
	ck_assert(!v.readonly);
	ck_assert_int_eq(v.mode, VNVME_EMULATE);
	ck_assert_str_eq(v.id, "");

	ck_assert_int_eq(config_parse_vnvme("file=d.img,size=1G,readonly=on,serial=SN-1 x,id=disk0",
					    &v, err, sizeof(err)),
			 0);
	ck_assert_str_eq(v.path, "d.img");
	ck_assert_uint_eq(v.size, 1ULL << 30);
	ck_assert(v.readonly);
	ck_assert_str_eq(v.serial, "SN-1 x");
	ck_assert_str_eq(v.id, "disk0");

	ck_assert_int_eq(
	    config_parse_vnvme("file=d.img,readonly=off,mode=emulate", &v, err, sizeof(err)), 0);
	ck_assert(!v.readonly);
	ck_assert_uint_eq(v.queues, 0); /* one per vCPU */
	ck_assert_int_eq(config_parse_vnvme("file=d.img,queues=65535", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v.queues, 65535);
	ck_assert_int_eq(config_parse_vnvme("ssd0:1G,queues=1", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v.queues, 1);
}
END_TEST

START_TEST(vnvme_ssd_form)
{
	struct vnvme_config v;

	ck_assert_int_eq(config_parse_vnvme("ssd0:10G", &v, err, sizeof(err)), 0);
	ck_assert_str_eq(v.ssd, "ssd0");
	ck_assert_str_eq(v.path, "");
	ck_assert_uint_eq(v.size, 10ULL << 30);
	ck_assert_int_eq(v.mode, VNVME_ISOLATED); /* an ssd's default: the guest is not trusted */
	ck_assert_int_eq(v.doorbell, VNVME_DB_AUTO);

	/* an existing volume needs no size; doorbell kind chosen by the operator */
	ck_assert_int_eq(config_parse_vnvme("ssd0,vol=data,doorbell=eventfd", &v, err, sizeof(err)),
			 0);
	ck_assert_str_eq(v.ssd, "ssd0");
	ck_assert_str_eq(v.vol, "data");
	ck_assert_uint_eq(v.size, 0);
	ck_assert_int_eq(v.doorbell, VNVME_DB_EVENTFD);
	ck_assert_int_eq(config_parse_vnvme("ssd0:1G,mode=emulate", &v, err, sizeof(err)), 0);
	ck_assert_int_eq(v.mode, VNVME_EMULATE);

	ck_assert_int_eq(
	    config_parse_vnvme("ssd1:512m,vol=vm1-root,mode=passthrough", &v, err, sizeof(err)), 0);
	ck_assert_str_eq(v.ssd, "ssd1");
	ck_assert_str_eq(v.vol, "vm1-root");
	ck_assert_uint_eq(v.size, 512ULL << 20);
	ck_assert_int_eq(v.mode, VNVME_PASSTHROUGH);

	ck_assert_int_eq(config_parse_vnvme("ssd1:4K,mode=isolated,id=n1", &v, err, sizeof(err)),
			 0);
	ck_assert_int_eq(v.mode, VNVME_ISOLATED);
	ck_assert_str_eq(v.id, "n1");
}
END_TEST

static void vnvme_bad(const char *s, const char *want)
{
	struct vnvme_config v;

	memset(&v, 0x5a, sizeof(v));
	err[0] = 0;
	ck_assert_int_eq(config_parse_vnvme(s, &v, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, want), "'%s': message '%s' lacks '%s'", s ? s : "(null)", err,
		      want);
	ck_assert_uint_eq(((unsigned char *)&v)[0], 0x5a); /* output untouched on error */
}

START_TEST(vnvme_errors)
{
	char longpath[CONFIG_PATH_MAX + 16];

	vnvme_bad("ssd0,readonly=on", "ssd0,vol=NAME");
	vnvme_bad("ssd0:1G,doorbell=mmio", "doorbell 'mmio'");

	vnvme_bad("", "empty");
	vnvme_bad(NULL, "empty");
	vnvme_bad(",", "no backing");
	vnvme_bad("disk.img", "'disk.img' is neither");
	vnvme_bad("file=", "empty file path");
	vnvme_bad("file=d.img,bogus=1", "unknown key 'bogus'");
	vnvme_bad("file=d.img,queues=0", "queues '0' is not a number of I/O queues 1..65535");
	vnvme_bad("file=d.img,queues=65536", "queues '65536'");
	vnvme_bad("file=d.img,queues=-1", "queues '-1'");
	vnvme_bad("file=d.img,queues=4x", "queues '4x'");
	vnvme_bad("file=d.img,queues=", "queues ''");
	vnvme_bad("file=d.img,vol=x", "unknown key 'vol'");
	vnvme_bad("ssd0:1G,size=2G", "unknown key 'size'");
	vnvme_bad("ssd0:1G,path=x", "unknown key 'path'");
	vnvme_bad("file=d.img,size=12Q", "'12Q' has an unknown suffix");
	vnvme_bad("file=d.img,size=", "size is empty");
	vnvme_bad("ssd0:12Q", "vnvme ssd0 size: '12Q' has an unknown suffix");
	vnvme_bad("ssd0:", "vnvme ssd0 size: size is empty");
	vnvme_bad("ssd0:0", "greater than 0");
	vnvme_bad(":1G", "ssd name ''");
	vnvme_bad("ss/d:1G", "ssd name 'ss/d'");
	vnvme_bad("ssd0:1G,mode=turbo", "mode 'turbo'");
	vnvme_bad("file=d.img,mode=passthrough", "mode passthrough needs an ssd");
	vnvme_bad("file=d.img,readonly=maybe", "readonly 'maybe'");
	vnvme_bad("file=d.img,serial=", "serial ''");
	vnvme_bad("file=d.img,serial=123456789012345678901", "serial '123456789012345678901'");
	vnvme_bad("file=d.img,serial=a\tb", "non-printable");
	vnvme_bad("file=d.img,id=a b", "id 'a b'");
	vnvme_bad("file=d.img,readonly", "'readonly' is not key=value");
	vnvme_bad("file=d.img,=on", "'=on' is not key=value");
	vnvme_bad("ssd0:1G,vol=", "vol ''");
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = 0;
	memcpy(longpath, "file=", 5);
	vnvme_bad(longpath, "too long");
}
END_TEST

/* A config that passes, with a real readable kernel file. */
static char kpath[64];

static void valid_config(struct vm_config *c)
{
	config_defaults(c);
	snprintf(c->kernel, sizeof(c->kernel), "%s", kpath);
}

static void setup_kernel(void)
{
	int fd;

	strcpy(kpath, "/tmp/lvmm-test-config-XXXXXX");
	fd = mkstemp(kpath);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "x", 1), 1);
	close(fd);
}

static void teardown_kernel(void)
{
	unlink(kpath);
}

static void invalid(const struct vm_config *c, const char *want)
{
	err[0] = 0;
	ck_assert_int_lt(config_validate(c, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, want), "message '%s' lacks '%s'", err, want);
}

START_TEST(validate_defaults)
{
	struct vm_config c;

	config_defaults(&c);
	ck_assert_uint_eq(c.cpus, CONFIG_DEFAULT_CPUS);
	ck_assert_uint_eq(c.max_cpus, CONFIG_DEFAULT_CPUS);
	ck_assert_uint_eq(c.memory, CONFIG_DEFAULT_MEMORY);
	ck_assert_int_eq(c.serial, SERIAL_STDIO);
	ck_assert_uint_eq(c.nvnvme, 0);
	invalid(&c, "no kernel image");

	valid_config(&c);
	ck_assert_msg(config_validate(&c, err, sizeof(err)) == 0, "%s", err);
	c.cpus = 4;
	c.max_cpus = 8;
	c.memory = 4ULL << 30;
	c.serial = SERIAL_FILE;
	strcpy(c.serial_file, "/tmp/console.log");
	ck_assert_msg(config_validate(&c, err, sizeof(err)) == 0, "%s", err);
	c.cpus = c.max_cpus = 255;
	ck_assert_msg(config_validate(&c, err, sizeof(err)) == 0, "%s", err);
}
END_TEST

START_TEST(validate_errors)
{
	struct vm_config c;

	valid_config(&c);
	c.cpus = 0;
	invalid(&c, "cpus: 0 is outside 1..255");
	valid_config(&c);
	c.cpus = c.max_cpus = 256;
	invalid(&c, "cpus: 256");
	valid_config(&c);
	c.cpus = 4;
	c.max_cpus = 2;
	invalid(&c, "max_cpus: 2 is outside 4..255");
	valid_config(&c);
	c.max_cpus = 300;
	invalid(&c, "max_cpus: 300");
	valid_config(&c);
	c.memory = (16ULL << 20) - 4096;
	invalid(&c, "memory: 16773120 bytes is below the minimum of 16 MiB");
	valid_config(&c);
	c.memory = (1ULL << 40) + 4096;
	invalid(&c, "above the maximum");
	valid_config(&c);
	/* RAM past 511 GiB would run into the 64-bit PCI window at 512 GiB */
	c.memory = 512ULL << 30;
	invalid(&c, "above the maximum of 511 GiB");
	valid_config(&c);
	c.memory = (64ULL << 20) + 1;
	invalid(&c, "not a multiple of 4 KiB");
	valid_config(&c);
	strcpy(c.kernel, "/nonexistent/vmlinux");
	invalid(&c, "kernel /nonexistent/vmlinux: No such file");
	valid_config(&c);
	strcpy(c.initramfs, "/nonexistent/initrd");
	invalid(&c, "initramfs /nonexistent/initrd");
	valid_config(&c);
	c.serial = SERIAL_FILE;
	invalid(&c, "serial: mode file needs a path");
	valid_config(&c);
	c.serial = (enum serial_mode)17;
	invalid(&c, "serial: mode 17");
	valid_config(&c);
	memset(c.kernel, 'k', sizeof(c.kernel));
	invalid(&c, "unterminated");
}
END_TEST

START_TEST(validate_vnvme)
{
	struct vm_config c;

	valid_config(&c);
	c.nvnvme = 3;
	ck_assert_int_eq(config_parse_vnvme("file=a.img", &c.vnvme[0], err, sizeof(err)), 0);
	ck_assert_int_eq(config_parse_vnvme("ssd0:1G,mode=isolated", &c.vnvme[1], err, sizeof(err)),
			 0);
	ck_assert_int_eq(config_parse_vnvme("ssd0:1G,id=fast", &c.vnvme[2], err, sizeof(err)), 0);
	ck_assert_msg(config_validate(&c, err, sizeof(err)) == 0, "%s", err);

	/* An explicit id equal to another device's default id collides. */
	strcpy(c.vnvme[2].id, "nvme0");
	invalid(&c, "id 'nvme0' is used twice");
	strcpy(c.vnvme[2].id, "fast");
	strcpy(c.vnvme[1].id, "fast");
	invalid(&c, "id 'fast' is used twice");
	c.vnvme[1].id[0] = 0;
	/* ids are unique across models: the virtio-rng is rng0 (only when the VM has one) */
	strcpy(c.vnvme[2].id, "rng0");
	ck_assert_msg(config_validate(&c, err, sizeof(err)) == 0, "%s", err);
	strcpy(c.rng_src, "/dev/urandom");
	invalid(&c, "device id 'rng0' is used twice (vnvme and virtio-rng)");
	strcpy(c.vnvme[2].id, "rng1");
	ck_assert_msg(config_validate(&c, err, sizeof(err)) == 0, "%s", err);
	c.rng_src[0] = 0;
	strcpy(c.vnvme[2].id, "fast");

	c.nvnvme = CONFIG_MAX_VNVME + 1;
	invalid(&c, "9 devices");
	c.nvnvme = 3;
	c.vnvme[0].mode = VNVME_PASSTHROUGH;
	invalid(&c, "vnvme nvme0: mode passthrough needs an ssd");
	c.vnvme[0].mode = VNVME_EMULATE;
	strcpy(c.vnvme[0].ssd, "ssd9");
	invalid(&c, "exactly one of");
	c.vnvme[0].ssd[0] = 0;
	c.vnvme[1].size = 0;
	invalid(&c, "ssd ssd0 needs a size");
	c.vnvme[1].size = 1;
	c.vnvme[1].mode = (enum vnvme_mode)9;
	invalid(&c, "mode 9");
}
END_TEST

START_TEST(serial_forms)
{
	struct vm_config c;

	config_defaults(&c);
	ck_assert_uint_eq(c.serial_limit, CONFIG_DEFAULT_SERIAL_LIMIT);
	ck_assert_int_eq(config_parse_serial("file=/var/log/vm1.log", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.serial, SERIAL_FILE);
	ck_assert_str_eq(c.serial_file, "/var/log/vm1.log");
	ck_assert(!c.serial_truncate);
	ck_assert_uint_eq(c.serial_limit, CONFIG_DEFAULT_SERIAL_LIMIT);
	ck_assert_int_eq(
	    config_parse_serial("file=/tmp/a,b.log,truncate=on,limit=1M", &c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.serial_file, "/tmp/a,b.log"); /* a comma that is no option stays */
	ck_assert(c.serial_truncate);
	ck_assert_uint_eq(c.serial_limit, 1 << 20);
	ck_assert_int_eq(config_parse_serial("file=/x,limit=0", &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.serial_limit, 0); /* no limit */
	ck_assert(!c.serial_truncate);
	ck_assert_int_eq(config_parse_serial("off", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.serial, SERIAL_OFF);
	ck_assert_str_eq(c.serial_file, "");
	ck_assert_int_eq(config_parse_serial("stdio", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.serial, SERIAL_STDIO);
	ck_assert_int_eq(config_parse_serial("file=/x,limit=12Q", &c, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "limit"));
	ck_assert_int_eq(config_parse_serial("file=", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_serial("file=,truncate=on", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_serial("pty", &c, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "pty"));
}
END_TEST

/* --device: cloud-hypervisor's path and id; iommu and other segments refused by name. */
START_TEST(device_forms)
{
	struct vfio_pci_config d;

	ck_assert_int_eq(config_parse_device("path=/sys/bus/pci/devices/0000:41:00.0,id=gpu0", &d,
					     err, sizeof(err)),
			 0);
	ck_assert_str_eq(d.path, "/sys/bus/pci/devices/0000:41:00.0");
	ck_assert_str_eq(d.id, "gpu0");
	ck_assert(!d.iommu);
	ck_assert_int_eq(
	    config_parse_device("path=0000:41:00.0,iommu=off,pci_segment=0", &d, err, sizeof(err)),
	    0);
	ck_assert_str_eq(d.id, "");
	ck_assert_int_eq(config_parse_device("path=0000:41:00.0,iommu=on", &d, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "iommu"));
	ck_assert_int_eq(
	    config_parse_device("path=0000:41:00.0,pci_segment=2", &d, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "pci_segment"));
	ck_assert_int_eq(config_parse_device("path=0000:41:00.0,rom=x", &d, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "'rom'"));
	ck_assert_int_eq(config_parse_device("id=a", &d, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "path="));
	ck_assert_int_eq(config_parse_device("path=", &d, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_device("path=0000:41:00.0,id=../x", &d, err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(config_parse_device("", &d, err, sizeof(err)), -EINVAL);
}
END_TEST

/* One host function, two spellings: refused before anything opens it. */
START_TEST(validate_device_twice)
{
	struct vm_config c;

	valid_config(&c);
	c.ndevices = 2;
	ck_assert_int_eq(config_parse_device("path=/sys/bus/pci/devices/0000:00:04.0",
					     &c.devices[0], err, sizeof(err)),
			 0);
	ck_assert_int_eq(config_parse_device("path=00:04.1", &c.devices[1], err, sizeof(err)), 0);
	ck_assert_msg(config_validate(&c, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(config_parse_device("path=00:04.0", &c.devices[1], err, sizeof(err)), 0);
	invalid(&c, "0000:00:04.0 is passed through twice");
	ck_assert_int_eq(config_parse_device("path=0000:00:04.0/", &c.devices[1], err, sizeof(err)),
			 0);
	invalid(&c, "passed through twice");
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, size_valid);
	tcase_add_test(tc, size_invalid);
	tcase_add_test(tc, count_parsing);
	tcase_add_test(tc, shared_size_parser);
	tcase_add_test(tc, vnvme_file_form);
	tcase_add_test(tc, vnvme_ssd_form);
	tcase_add_test(tc, vnvme_errors);
	tcase_add_test(tc, serial_forms);
	tcase_add_test(tc, device_forms);
	suite_add_tcase(s, tc);
	tc = tcase_create("validate");
	tcase_add_checked_fixture(tc, setup_kernel, teardown_kernel);
	tcase_add_test(tc, validate_defaults);
	tcase_add_test(tc, validate_errors);
	tcase_add_test(tc, validate_vnvme);
	tcase_add_test(tc, validate_device_twice);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(config_suite());
}
