/* ext4 root-image checks for the Linux suite (ext4check.h). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ext4check.h"
#include "testutil.h"

int ext4check_mounts(const char *img, char *when, size_t len)
{
	char cmd[256], *out, *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "dumpe2fs -h %s 2>/dev/null", img);
	ck_assert_int_eq(testutil_sh(cmd, &out), 0);
	p = strstr(out, "Mount count:");
	if (p)
		sscanf(p, "Mount count: %d", &n);
	p = strstr(out, "Last mount time:");
	ck_assert_ptr_nonnull(p);
	p += strlen("Last mount time:");
	p += strspn(p, " ");
	snprintf(when, len, "%.*s", (int)strcspn(p, "\n"), p);
	free(out);
	return n;
}

char *ext4check_cat(const char *img, const char *path)
{
	char cmd[512], *out;

	snprintf(cmd, sizeof(cmd), "debugfs -R 'cat %s' %s 2>/dev/null", path, img);
	ck_assert_msg(testutil_sh(cmd, &out) == 0, "debugfs cat %s on %s failed", path, img);
	return out;
}

void ext4check_after_boot(const char *img, int boot, char *last_mount, size_t len)
{
	char cmd[256], *out, want[64], when[64];
	int rc;

	/* e2fsck below resets the count after each boot: one mount since, at a new time */
	ck_assert_int_eq(ext4check_mounts(img, when, sizeof(when)), 1);
	ck_assert_msg(strcmp(when, "n/a") && strcmp(when, last_mount),
		      "last mount time did not advance: '%s'", when);
	snprintf(last_mount, len, "%s", when);
	/* powered off without unmounting: the journal may need replaying, then all is clean */
	snprintf(cmd, sizeof(cmd), "e2fsck -fy %s 2>&1", img);
	rc = testutil_sh(cmd, &out);
	ck_assert_msg(rc == 0 || rc == 1, "e2fsck -fy: rc %d\n%s", rc, out);
	free(out);
	snprintf(cmd, sizeof(cmd), "e2fsck -fn %s 2>&1", img);
	rc = testutil_sh(cmd, &out);
	ck_assert_msg(rc == 0, "e2fsck -fn after recovery: rc %d\n%s", rc, out);
	free(out);
	out = ext4check_cat(img, "/guest-was-here");
	snprintf(want, sizeof(want), "written by the guest, boot %d", boot);
	ck_assert_msg(strstr(out, want), "/guest-was-here on the image: '%s'", out);
	free(out);
}

void ext4check_make_root(const char *dir, const char *img, unsigned mb, const char *init_script,
			 const char *const *extra)
{
	static const char *const sub[] = {"bin", "dev", "proc", "sys"};
	char root[256], path[512], cmd[1024];

	snprintf(root, sizeof(root), "%s/rootfs", dir);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	for (unsigned i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", root, sub[i]);
		ck_assert_int_eq(mkdir(path, 0755), 0);
	}
	snprintf(cmd, sizeof(cmd), "cp /bin/busybox %s/bin/busybox", root);
	ck_assert_msg(testutil_sh(cmd, NULL) == 0, "busybox-static is not installed");
	for (unsigned i = 0; extra && extra[i] && extra[i + 1]; i += 2) {
		snprintf(cmd, sizeof(cmd), "cp %s %s/%s", extra[i], root, extra[i + 1]);
		ck_assert_msg(testutil_sh(cmd, NULL) == 0, "%s", cmd);
	}
	snprintf(path, sizeof(path), "%s/init", root);
	testutil_write_file(path, init_script, strlen(init_script), 0755);
	snprintf(cmd, sizeof(cmd), "mkfs.ext4 -q -F -d %s %s %uM 2>&1", root, img, mb);
	ck_assert_msg(testutil_sh(cmd, NULL) == 0, "mkfs.ext4 failed");
	snprintf(cmd, sizeof(cmd),
		 "printf 'cd /dev\\nmknod console c 5 1\\nsif console mode 020600\\n"
		 "mknod null c 1 3\\nsif null mode 020666\\n' | debugfs -w -f - %s >/dev/null 2>&1",
		 img);
	ck_assert_msg(testutil_sh(cmd, NULL) == 0, "debugfs mknod failed");
	testutil_rmtree(root);
}
