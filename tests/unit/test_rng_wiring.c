/* virtio-rng and PCI segments wired into a VM's configuration: lvmm run's --rng, the VmConfig's
 * rng.src and platform.num_pci_segments, and the entropy sources a VM may be fed from. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_internal.h"
#include "config.h"
#include "fsutil.h"
#include "guest_mem.h"
#include "testutil.h"
#include "virtio/virtio_pci.h"
#include "virtio/virtio_rng.h"

static char err[512];

START_TEST(test_rng_flag)
{
	struct vm_config c;

	config_defaults(&c);
	ck_assert_str_eq(c.rng_src, "");
	ck_assert_uint_eq(c.num_pci_segments, 1);
	ck_assert_int_eq(config_parse_rng(NULL, &c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.rng_src, "/dev/urandom");
	ck_assert_int_eq(config_parse_rng("src=/dev/random", &c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.rng_src, "/dev/random");
	ck_assert_int_eq(config_parse_rng("/dev/random", &c, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "/dev/random"));
	ck_assert_int_eq(config_parse_rng("src=", &c, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(c.rng_src, "/dev/random");
}
END_TEST

/* Only the kernel's entropy devices: never a file or another device whose bytes are host data. */
START_TEST(test_rng_sources)
{
	char dir[256], file[300], link[300], kernel[300];
	struct vm_config c;
	int fd;

	snprintf(dir, sizeof(dir), "/tmp/lvmm-rngw-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/secret", dir);
	snprintf(link, sizeof(link), "%s/urandom", dir);
	snprintf(kernel, sizeof(kernel), "%s/vmlinux", dir);
	testutil_write_file(file, "host data", 9, 0600);
	testutil_write_file(kernel, "x", 1, 0600);
	ck_assert_int_eq(symlink("/dev/urandom", link), 0);

	fd =
	    fsutil_open(NULL, "rng", "/dev/urandom", O_RDONLY, 0, FSUTIL_ENTROPY, err, sizeof(err));
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(
	    fsutil_open(NULL, "rng", "/dev/zero", O_RDONLY, 0, FSUTIL_ENTROPY, err, sizeof(err)),
	    -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "/dev/zero: is another character device"));
	ck_assert_int_eq(
	    fsutil_open(NULL, "rng", file, O_RDONLY, 0, FSUTIL_ENTROPY, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "is a regular file"));
	ck_assert_int_lt(
	    fsutil_open(NULL, "rng", link, O_RDONLY, 0, FSUTIL_ENTROPY, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "symbolic link"));

	/* vm.create's check (config_validate) and lvmm run's */
	config_defaults(&c);
	snprintf(c.kernel, sizeof(c.kernel), "%s", kernel);
	ck_assert_int_eq(config_validate(&c, err, sizeof(err)), 0);
	snprintf(c.rng_src, sizeof(c.rng_src), "/dev/urandom");
	ck_assert_int_eq(config_validate(&c, err, sizeof(err)), 0);
	snprintf(c.rng_src, sizeof(c.rng_src), "%s", file);
	ck_assert_int_eq(config_validate(&c, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, file));
	snprintf(c.rng_src, sizeof(c.rng_src), "/dev/null");
	ck_assert_int_eq(config_validate(&c, err, sizeof(err)), -EINVAL);
	c.rng_src[0] = 0;
	c.num_pci_segments = 97;
	ck_assert_int_eq(config_validate(&c, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "97"));

	unlink(link);
	unlink(file);
	unlink(kernel);
	rmdir(dir);
}
END_TEST

START_TEST(test_rng_device_source)
{
	static uint8_t ram[1 << 16];
	struct virtio_rng *r = NULL;
	struct guest_mem gm;

	gmem_init_buffer(&gm, ram, sizeof(ram));
	ck_assert_int_eq(virtio_rng_create(&r, "rng0", "/dev/zero", &gm, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_null(r);
	ck_assert_ptr_nonnull(strstr(err, "rng rng0"));
	ck_assert_ptr_nonnull(strstr(err, "/dev/zero"));
	ck_assert_int_eq(virtio_rng_create(&r, "rng0", "/dev/urandom", &gm, err, sizeof(err)), 0);
	ck_assert_uint_eq(virtio_rng_pci(r)->cfg[0] | virtio_rng_pci(r)->cfg[1] << 8, 0x1af4);
	virtio_rng_destroy(r);
}
END_TEST

/* The VmConfig's rng and platform reach struct vm_config; no rng, no device. */
START_TEST(test_rng_vmconfig)
{
	struct vm_config c;
	json_error_t je;
	json_t *j;

	j = json_loads("{\"payload\": {\"kernel\": \"/k\"}, \"rng\": {\"src\": \"/dev/urandom\","
		       " \"iommu\": false}, \"platform\": {\"num_pci_segments\": 2}}",
		       0, &je);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(api_json_to_config(j, NULL, &c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.rng_src, "/dev/urandom");
	ck_assert_uint_eq(c.num_pci_segments, 2);
	json_decref(j);

	j = json_loads("{\"payload\": {\"kernel\": \"/k\"}}", 0, &je);
	ck_assert_int_eq(api_json_to_config(j, NULL, &c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.rng_src, "");
	ck_assert_uint_eq(c.num_pci_segments, 1);
	json_decref(j);

	j = json_loads("{\"payload\": {\"kernel\": \"/k\"}, \"rng\": {\"src\": \"\"}}", 0, &je);
	ck_assert_int_ne(api_json_to_config(j, NULL, &c, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "rng.src"));
	json_decref(j);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rng_wiring");
	TCase *tc = tcase_create("rng");

	tcase_add_test(tc, test_rng_flag);
	tcase_add_test(tc, test_rng_sources);
	tcase_add_test(tc, test_rng_device_source);
	tcase_add_test(tc, test_rng_vmconfig);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
