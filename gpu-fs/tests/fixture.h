/* Test fixture shared by the gpu-fs host tests (C and CUDA): a temp directory on the first
 * candidate file system that gvdk can map (block-device backed), removed after each test. */
#ifndef GPUFS_TESTS_FIXTURE_H
#define GPUFS_TESTS_FIXTURE_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gvdk.h"

static char tdir[512], tfile[600];

/* prefix names the directory ("gvdk-test"); tfile becomes "<dir>/f.gvdk". */
static void fixture_setup(const char *prefix)
{
	const char *cand[] = {getenv("GPUFS_TEST_DIR"), ".", "/tmp", "/var/tmp"};
	char err[GVDK_ERRLEN] = "", probe[600];

	for (unsigned i = 0; i < sizeof(cand) / sizeof(cand[0]); i++) {
		if (!cand[i])
			continue;
		snprintf(tdir, sizeof(tdir), "%s/%s-XXXXXX", cand[i], prefix);
		if (!mkdtemp(tdir))
			continue;
		snprintf(probe, sizeof(probe), "%s/probe", tdir);
		if (gvdk_create(probe, 65536, NULL, err) == 0) {
			unlink(probe);
			snprintf(tfile, sizeof(tfile), "%s/f.gvdk", tdir);
			return;
		}
		rmdir(tdir);
	}
	ck_abort_msg("no candidate directory is on a block-device file system: %s", err);
}

static void teardown(void)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
	ck_assert_int_eq(system(cmd), 0);
}

#endif
