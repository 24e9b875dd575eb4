/* lvmm run --device on a host without VFIO (no /dev/vfio): one line naming the device and why,
 * exit status 1, and no guest started. A device spec lvmm cannot take is refused the same way
 * before anything is opened. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

/* lvmm's status: 1 for a VM that cannot be built, 2 for a command line it does not take.
 * jail: run with --jail DIR, where the device is opened before the jail. */
static void run_refused_in(const char *spec, const char *jail, int status, const char *want)
{
	char *args[] = {"run",	      "--kernel", (char *)testutil_bench_guest(),
			"--memory",   "32M",	  "--device",
			(char *)spec, NULL,	  NULL,
			NULL};
	struct testutil_run r;

	if (jail) {
		args[7] = "--jail";
		args[8] = (char *)jail;
	}

	testutil_run_lvmm(&r, args, NULL, NULL, 0, 30);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == status, "status %#x: %s",
		      r.status, r.err);
	ck_assert_msg(strstr(r.err, want), "'%s' not in: %s", want, r.err);
	ck_assert_msg(testutil_lines(r.err) == 1, "more than the reason: %s", r.err);
	ck_assert_msg(!strstr(r.out, "hello"), "the guest ran: %s", r.out);
	fprintf(stderr, "refused as expected: %s", r.err);
}

static void run_refused(const char *spec, int status, const char *want)
{
	run_refused_in(spec, NULL, status, want);
}

START_TEST(test_no_vfio)
{
	if (!access("/dev/vfio", F_OK)) {
		testutil_skip("vfio_nodev: this host has /dev/vfio");
		return;
	}
	if (!testutil_kvm_usable()) {
		testutil_skip("vfio_nodev: /dev/kvm not usable here");
		return;
	}
	run_refused("path=/sys/bus/pci/devices/0000:00:1f.7,id=gpu0", 1, "lvmm: device gpu0");
	run_refused("path=/sys/bus/pci/devices/0000:00:1f.7,id=gpu0", 1, "/dev/vfio");
}
END_TEST

/* --jail opens the devices before it confines the process: the same one line, before any jail
 * is made. */
START_TEST(test_no_vfio_jail)
{
	char dir[64];

	if (!access("/dev/vfio", F_OK) || geteuid()) {
		testutil_skip("vfio_nodev: /dev/vfio here, or not root (--jail)");
		return;
	}
	if (!testutil_kvm_usable()) { /* lvmm opens /dev/kvm before the devices */
		testutil_skip("vfio_nodev: /dev/kvm not usable here");
		return;
	}
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-vfiojail-");
	run_refused_in("path=/sys/bus/pci/devices/0000:00:1f.7,id=gpu0", dir, 1,
		       "lvmm: device gpu0: vfio: /dev/vfio");
	testutil_rmtree(dir);
}
END_TEST

START_TEST(test_bad_specs)
{
	run_refused("path=/sys/bus/pci/devices/0000:00:1f.7,x_nv_gpudirect_clique=0", 2,
		    "unknown option 'x_nv_gpudirect_clique'");
	run_refused("path=/sys/bus/pci/devices/0000:00:1f.7,iommu=on", 2, "iommu=on");
	run_refused("path=/sys/bus/pci/devices/0000:00:1f.7,pci_segment=1", 2, "pci_segment");
	run_refused("id=gpu0", 2, "path=/sys/bus/pci/devices/BDF is required");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("vfio_nodev");
	TCase *t = tcase_create("vfio_nodev");

	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_no_vfio);
	tcase_add_test(t, test_no_vfio_jail);
	tcase_add_test(t, test_bad_specs);
	suite_add_tcase(s, t);
	return testutil_run_suite(s);
}
