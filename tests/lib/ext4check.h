/* Checks of an ext4 root image on the host, after a Linux guest booted from it and powered off
 * without unmounting (the Linux suite's disks: test_linux_nvme, _vnvme, _frontend). */
#ifndef LVMM_EXT4CHECK_H
#define LVMM_EXT4CHECK_H

#include <stddef.h>

/* A root file system image of mb MiB at img, built in dir (a scratch subdirectory is made and
 * removed): /bin/busybox (busybox-static), init_script as /init (0755), each extra[i] (pairs of
 * host path and image path, NULL-terminated, may be NULL) copied in, and the /dev/console and
 * /dev/null nodes (by debugfs: the test needs no privilege for mknod; the test kernel mounts no
 * devtmpfs). Fails the test when a step does. */
void ext4check_make_root(const char *dir, const char *img, unsigned mb, const char *init_script,
			 const char *const *extra);

/* Mount count and last mount time ("n/a" when never) from img's superblock. */
int ext4check_mounts(const char *img, char *when, size_t len);
/* The file at path on img (debugfs cat), malloc'd; fails the test when debugfs does. */
char *ext4check_cat(const char *img, const char *path);
/* After boot n: mounted once since the last e2fsck, at a time other than *last_mount (updated),
 * clean once e2fsck has replayed the journal, and /guest-was-here reads "written by the guest,
 * boot n". Leaves the count reset for the next boot. */
void ext4check_after_boot(const char *img, int boot, char *last_mount, size_t len);

#endif
