/* The guest `lvmm run` boots without --kernel: the kernel and initramfs `make` builds, found next
 * to the binary (the build tree) first, then where `make install` puts them (share/lvmm). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "default_guest.h"

/* DIR/vmlinux (+ DIR/initramfs.cpio when present) into c; false when DIR has no kernel. */
static bool guest_in(struct vm_config *c, const char *dir)
{
	char k[PATH_MAX], i[PATH_MAX];

	if (snprintf(k, sizeof(k), "%s/vmlinux", dir) >= (int)sizeof(k) ||
	    snprintf(i, sizeof(i), "%s/initramfs.cpio", dir) >= (int)sizeof(i) || access(k, R_OK))
		return false;
	snprintf(c->kernel, sizeof(c->kernel), "%s", k);
	if (!c->initramfs[0] && !access(i, R_OK))
		snprintf(c->initramfs, sizeof(c->initramfs), "%s", i);
	return true;
}

int default_guest_find(struct vm_config *c, char *err, unsigned errlen)
{
	char exe[PATH_MAX], dirs[4][PATH_MAX + 32], *slash;
	const char *only = getenv("LVMM_GUEST_DIR");
	ssize_t n;
	unsigned k;

	/* An operator (or a test) names the one place to look. */
	if (only && only[0]) {
		if (guest_in(c, only)) {
			if (!c->cmdline[0])
				snprintf(c->cmdline, sizeof(c->cmdline), "console=ttyS0");
			return 0;
		}
		snprintf(err, errlen,
			 "no --kernel given and no default guest (vmlinux) in %s ($LVMM_GUEST_DIR)",
			 only);
		return -ENOENT;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		snprintf(err, errlen, "no --kernel, and the lvmm binary's directory is unknown: %s",
			 strerror(errno));
		return -ENOENT;
	}
	exe[n] = 0;
	slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	snprintf(dirs[0], sizeof(dirs[0]), "%s/guest", exe);
	snprintf(dirs[1], sizeof(dirs[1]), "%s/../share/lvmm", exe);
	snprintf(dirs[2], sizeof(dirs[2]), "/usr/local/share/lvmm");
	snprintf(dirs[3], sizeof(dirs[3]), "/usr/share/lvmm");
	for (k = 0; k < 4; k++) {
		if (!guest_in(c, dirs[k]))
			continue;
		if (!c->cmdline[0])
			snprintf(c->cmdline, sizeof(c->cmdline), "console=ttyS0");
		return 0;
	}
	snprintf(err, errlen,
		 "no --kernel given and no default guest (vmlinux) in %s, %s, %s or %s: run make "
		 "guest, or make install",
		 dirs[0], dirs[1], dirs[2], dirs[3]);
	return -ENOENT;
}
