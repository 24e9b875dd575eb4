/* KVM memory-slot ids of host mappings (a CMB BAR) are reused: a guest toggling a BAR's decode
 * forever maps and unmaps it forever, past the number of slot ids KVM has. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "layout.h"
#include "testutil.h"
#include "vm.h"

START_TEST(test_map_unmap_40k)
{
	uint64_t gpa = LAYOUT_MMIO64_START + (1ULL << 32);
	struct vm_config cfg;
	struct vm *vm;
	char err[256];
	void *host;
	unsigned i;
	int r;

	config_defaults(&cfg);
	cfg.memory = 64ULL << 20;
	cfg.serial = SERIAL_OFF;
	snprintf(cfg.kernel, sizeof(cfg.kernel), "%s", testutil_bench_guest());
	ck_assert_msg(vm_create(&cfg, &vm, err, sizeof(err)) == 0, "vm_create: %s", err);
	host = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(host, MAP_FAILED);
	/* KVM has at most 32764 user slot ids; the first prototype used a new one per map */
	for (i = 0; i < 40000; i++) {
		r = vm_map_host_mem(vm, gpa, 1 << 16, host, false);
		ck_assert_msg(r == 0, "map %u: %s", i, strerror(-r));
		r = vm_unmap_host_mem(vm, gpa);
		ck_assert_msg(r == 0, "unmap %u: %s", i, strerror(-r));
	}
	munmap(host, 1 << 16);
	vm_destroy(vm);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("memslots");
	TCase *tc = tcase_create("kvm");

	if (!testutil_kvm_usable()) {
		testutil_skip("memslots: /dev/kvm not usable here");
		return 0;
	}
	tcase_add_test(tc, test_map_unmap_40k);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
