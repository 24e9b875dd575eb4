/* Opening client-named files: a component walk with O_NOFOLLOW beneath an allowed directory held
 * open, non-blocking opens (a FIFO never hangs the caller), file-type checks and truncation. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "config.h"
#include "fsutil.h"

static const char *kind_name(mode_t m)
{
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISLNK(m))
		return "a symbolic link";
	return "not a regular file";
}

/* The allowed directory held since start: its path is only compared, never opened again. */
static char *held_root;
static size_t held_len;
static int held_fd = -1;

int fsutil_hold_root(const char *root, char *err, unsigned errlen)
{
	size_t rl = strlen(root);
	struct stat st;
	int fd;

	while (rl > 1 && root[rl - 1] == '/')
		rl--;
	if (root[0] != '/') {
		snprintf(err, errlen, "allowed directory %s: not an absolute path", root);
		return -EINVAL;
	}
	fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		int e = errno;

		snprintf(err, errlen, "allowed directory %s: %s", root, strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	free(held_root);
	if (held_fd >= 0)
		close(held_fd);
	held_root = strndup(root, rl);
	held_len = rl;
	held_fd = fd;
	if (!held_root) {
		close(fd);
		held_fd = -1;
		snprintf(err, errlen, "allowed directory %s: out of memory", root);
		return -ENOMEM;
	}
	return fd;
}

/* root's directory: a copy of the held fd when root names it, else root opened now. */
static int open_root(const char *root, size_t rl)
{
	int fd;

	if (held_fd >= 0 && rl == held_len && !strncmp(root, held_root, rl))
		fd = fcntl(held_fd, F_DUPFD_CLOEXEC, 3);
	else
		fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Opens the directory that holds path's last component; *last points into path. Returns a
 * directory fd, AT_FDCWD without a root, or a negative errno. */
static int walk_parent(const char *root, const char *what, const char *path, const char **last,
		       char *err, unsigned errlen)
{
	char comp[CONFIG_PATH_MAX];
	const char *p = path, *slash;
	size_t rl;
	int dfd, nfd;

	if (!*path) {
		snprintf(err, errlen, "%s: empty path", what);
		return -EINVAL;
	}
	if (!root || !*root) {
		*last = path;
		return AT_FDCWD;
	}
	rl = strlen(root);
	while (rl > 1 && root[rl - 1] == '/')
		rl--;
	/* Absolute only: the loader and the backends open the same string later, and a relative
	 * one would mean lvmm's working directory to them. */
	if (*p != '/' || strncmp(p, root, rl) || (p[rl] != '/' && rl > 1)) {
		snprintf(err, errlen,
			 "%s %s: not an absolute path beneath the allowed directory %s", what, path,
			 root);
		return -EACCES;
	}
	p += rl;
	dfd = open_root(root, rl);
	if (dfd < 0) {
		snprintf(err, errlen, "%s %s: allowed directory %s: %s", what, path, root,
			 strerror(-dfd));
		return dfd;
	}
	for (;;) {
		size_t n;

		while (*p == '/')
			p++;
		slash = strchr(p, '/');
		n = slash ? (size_t)(slash - p) : strlen(p);
		if (!n || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
			snprintf(err, errlen,
				 "%s %s: '.', '..' or an empty name is not allowed here", what,
				 path);
			close(dfd);
			return -EACCES;
		}
		if (n >= sizeof(comp)) {
			close(dfd);
			snprintf(err, errlen, "%s %s: name too long", what, path);
			return -ENAMETOOLONG;
		}
		if (!slash || !slash[strspn(slash, "/")])
			break; /* the last component */
		memcpy(comp, p, n);
		comp[n] = 0;
		nfd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0) {
			int e = errno;
			struct stat st;

			/* O_DIRECTORY wins over O_NOFOLLOW: a symlink says ENOTDIR. */
			if (e == ENOTDIR && !fstatat(dfd, comp, &st, AT_SYMLINK_NOFOLLOW) &&
			    S_ISLNK(st.st_mode))
				e = ELOOP;

			snprintf(err, errlen, "%s %s: directory '%s': %s", what, path, comp,
				 e == ELOOP ? "is a symbolic link" : strerror(e));
			close(dfd);
			return e == ELOOP ? -EACCES : -e;
		}
		close(dfd);
		dfd = nfd;
		p = slash;
	}
	*last = p;
	return dfd;
}

static int check_kind(const char *what, const char *path, const struct stat *st,
		      enum fsutil_kind kind, char *err, unsigned errlen)
{
	if (kind == FSUTIL_ENTROPY) {
		/* mem 8 (random), mem 9 (urandom), misc 183 (hwrng): devices.txt's numbers */
		if (S_ISCHR(st->st_mode) &&
		    ((major(st->st_rdev) == 1 &&
		      (minor(st->st_rdev) == 8 || minor(st->st_rdev) == 9)) ||
		     (major(st->st_rdev) == 10 && minor(st->st_rdev) == 183)))
			return 0;
		snprintf(err, errlen,
			 "%s %s: is %s, not the kernel's random, urandom or hwrng device", what,
			 path,
			 S_ISREG(st->st_mode)	? "a regular file"
			 : S_ISCHR(st->st_mode) ? "another character device"
						: kind_name(st->st_mode));
		return -EINVAL;
	}
	if (kind == FSUTIL_SOCKET) {
		if (S_ISSOCK(st->st_mode))
			return 0;
		snprintf(err, errlen, "%s %s: is %s, not a socket", what, path,
			 kind_name(st->st_mode));
		return -EINVAL;
	}
	if (S_ISREG(st->st_mode) || (kind == FSUTIL_REGULAR_OR_BLOCK && S_ISBLK(st->st_mode)))
		return 0;
	snprintf(err, errlen, "%s %s: is %s, not a regular file", what, path,
		 kind_name(st->st_mode));
	return -EINVAL;
}

int fsutil_open(const char *root, const char *what, const char *path, int flags, mode_t mode,
		enum fsutil_kind kind, char *err, unsigned errlen)
{
	const char *last;
	char name[CONFIG_PATH_MAX];
	bool trunc = flags & O_TRUNC;
	struct stat st;
	int dfd, fd, r, e;
	size_t n;

	dfd = walk_parent(root, what, path, &last, err, errlen);
	if (dfd < 0 && dfd != AT_FDCWD)
		return dfd;
	n = strcspn(last, "/");
	if (n >= sizeof(name))
		n = sizeof(name) - 1;
	memcpy(name, last, n);
	name[n] = 0;
	/* O_NONBLOCK: opening a FIFO (for writing without a reader: ENXIO) or a device must
	 * not wait; the type check below refuses them anyway. */
	fd = openat(dfd, dfd == AT_FDCWD ? path : name,
		    (flags & ~O_TRUNC) | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, mode);
	e = errno;
	if (dfd != AT_FDCWD)
		close(dfd);
	if (fd < 0) {
		if (e == ELOOP) {
			snprintf(err, errlen, "%s %s: is a symbolic link", what, path);
			return -EACCES;
		}
		if (e == ENXIO) {
			snprintf(err, errlen, "%s %s: is a FIFO or device, not a regular file",
				 what, path);
			return -EINVAL;
		}
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(e));
		return -e;
	}
	if (fstat(fd, &st)) {
		r = -errno;
		snprintf(err, errlen, "%s %s: fstat: %s", what, path, strerror(errno));
		close(fd);
		return r;
	}
	r = check_kind(what, path, &st, kind, err, errlen);
	/* A second name means the file belongs to someone else too (a link made to a file the
	 * client could not name, outside the allowed directory): never written through. */
	if (!r && S_ISREG(st.st_mode) && st.st_nlink > 1 && (flags & O_ACCMODE) != O_RDONLY &&
	    !(flags & O_PATH)) {
		snprintf(err, errlen, "%s %s: has %lu hard links; not opened for writing", what,
			 path, (unsigned long)st.st_nlink);
		r = -EACCES;
	}
	if (!r && trunc && S_ISREG(st.st_mode) && st.st_size && ftruncate(fd, 0)) {
		r = -errno;
		snprintf(err, errlen, "%s %s: truncate: %s", what, path, strerror(errno));
	}
	if (r) {
		close(fd);
		return r;
	}
	return fd;
}

int fsutil_check(const char *root, const char *what, const char *path, bool may_create,
		 enum fsutil_kind kind, char *err, unsigned errlen)
{
	/* O_PATH: no permission needed and nothing opened for real (a FIFO cannot block). */
	int fd = fsutil_open(root, what, path, O_PATH, 0, kind, err, errlen);

	if (fd == -ENOENT && may_create) {
		const char *last;
		int dfd = walk_parent(root, what, path, &last, err, errlen);

		if (dfd < 0 && dfd != AT_FDCWD)
			return dfd;
		if (dfd != AT_FDCWD)
			close(dfd);
		return 0;
	}
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

int fsutil_open_dir(const char *root, const char *what, const char *path, char *err,
		    unsigned errlen)
{
	char comp[CONFIG_PATH_MAX];
	const char *last;
	size_t n;
	int dfd, fd;

	if (!root || !*root) {
		fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0) {
			snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
			return -errno;
		}
		return fd;
	}
	n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	if (n >= sizeof(comp)) {
		snprintf(err, errlen, "%s %s: name too long", what, path);
		return -ENAMETOOLONG;
	}
	memcpy(comp, path, n);
	comp[n] = 0;
	dfd = walk_parent(root, what, comp, &last, err, errlen);
	if (dfd < 0)
		return dfd;
	fd = openat(dfd, last, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		struct stat st;

		if (e == ENOTDIR && !fstatat(dfd, last, &st, AT_SYMLINK_NOFOLLOW) &&
		    S_ISLNK(st.st_mode))
			e = ELOOP;
		snprintf(err, errlen, "%s %s: %s", what, path,
			 e == ELOOP ? "is a symbolic link" : strerror(e));
		close(dfd);
		return e == ELOOP ? -EACCES : -e;
	}
	close(dfd);
	return fd;
}

int fsutil_open_parent(const char *what, const char *path, const char **last, char *err,
		       unsigned errlen)
{
	return walk_parent("/", what, path, last, err, errlen);
}

int fsutil_lock_image(int fd, bool write, const char *what, const char *path, char *err,
		      unsigned errlen)
{
	struct flock fl = {.l_type = write ? F_WRLCK : F_RDLCK, .l_whence = SEEK_SET};

	if (!fcntl(fd, F_OFD_SETLK, &fl))
		return 0;
	if (errno == EAGAIN || errno == EACCES) {
		snprintf(err, errlen, "%s: %s is in use by another VM or process (%s lock refused)",
			 what, path, write ? "write" : "read");
		return -EBUSY;
	}
	snprintf(err, errlen, "%s: cannot lock %s: %s", what, path, strerror(errno));
	return -errno;
}
