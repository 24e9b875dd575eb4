/* lvmm run --jail DIR: namespaces, a tmpfs root mounted on DIR's fd with the VM's files bound
 * in from fds, pivot_root, rlimits, closed fds and a uid/gid drop; the outer process waits. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fsutil.h"
#include "jail.h"
#include "client/lio_client.h"

#define JAIL_NOFILE   4096
#define JAIL_MAX_SRC  (5 + 2 * CONFIG_MAX_VNVME + CONFIG_MAX_DISKS)
#define JAIL_MNT_FLAG (MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)

struct jail_src {
	const char *path; /* absolute, no symlink in any component */
	const char *what;
	bool rw;
	int fd; /* O_PATH, opened in the jail's mount namespace */
};

struct jail {
	char dir[PATH_MAX]; /* DIR made absolute (lexically: it is walked, never resolved) */
	int rootfd;	    /* the tmpfs root */
	uid_t uid;
	gid_t gid;
	struct jail_src src[JAIL_MAX_SRC];
	unsigned nsrc;
	char ssd[CONFIG_MAX_VNVME][sizeof(((struct sockaddr_un *)0)->sun_path)];
	char vsock_dir[PATH_MAX]; /* --vsock's socket's directory, bound in read-only */
	struct stat vsock_dir_st; /* as checked: the one bound must be the same */
	const char *allowed;	  /* --allowed-dir, held as allowed_fd */
	int allowed_fd;
	char *err;
	unsigned errlen;
};

/* LVMM_TEST_PAUSE=POINT:FIFO (tests): at POINT, says so on FIFO and waits until the test has
 * done its part (opened FIFO for writing and closed it), so a race is run at a chosen moment. */
static void jail_test_pause(const char *point)
{
	const char *e = getenv("LVMM_TEST_PAUSE"), *fifo;
	size_t n = strlen(point);
	char c;
	int fd;

	if (!e || strncmp(e, point, n) || e[n] != ':')
		return;
	fifo = e + n + 1;
	fd = open(fifo, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (write(fd, point, n) < 0) {
		/* the test reads it or is gone: either way, go on */
	}
	close(fd);
	fd = open(fifo, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	while (read(fd, &c, 1) > 0)
		;
	close(fd);
}

/* path made absolute in place, lexically: relative to the working directory. */
static int jail_abs(struct jail *j, char *path, size_t cap, const char *what)
{
	char cwd[PATH_MAX], res[PATH_MAX];

	if (!path[0] || path[0] == '/')
		return 0;
	if (!getcwd(cwd, sizeof(cwd)) ||
	    (size_t)snprintf(res, sizeof(res), "%s/%s", cwd, path) >= sizeof(res) ||
	    strlen(res) >= cap) {
		snprintf(j->err, j->errlen, "jail: %s %s: %s", what, path,
			 errno ? strerror(errno) : "path too long");
		return -ENAMETOOLONG;
	}
	strcpy(path, res);
	return 0;
}

/* The last component of path (after fsutil_open_parent) into name. */
static int jail_name(struct jail *j, const char *last, char *name, size_t cap, const char *what,
		     const char *path)
{
	size_t n = strcspn(last, "/");

	if (!n || n >= cap) {
		snprintf(j->err, j->errlen, "jail: %s %s: no usable file name", what, path);
		return -EINVAL;
	}
	memcpy(name, last, n);
	name[n] = 0;
	return 0;
}

/* A file the VM creates at boot exists beforehand (a bind mount needs a source), the jail's
 * user owning it as it would had it created it. No component of path may be a symlink. */
static int jail_precreate(struct jail *j, const char *path, const char *what)
{
	char name[NAME_MAX + 1];
	const char *last;
	int dfd, fd, r;

	dfd = fsutil_open_parent(what, path, &last, j->err, j->errlen);
	if (dfd < 0)
		return dfd;
	r = jail_name(j, last, name, sizeof(name), what, path);
	if (r) {
		close(dfd);
		return r;
	}
	fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
	close(dfd);
	if (fd < 0)
		return errno == EEXIST ? 0 : -errno; /* an existing one is checked when bound */
	if (fchown(fd, j->uid, j->gid)) {
		snprintf(j->err, j->errlen, "jail: %s %s: chown to %u: %s", what, path,
			 (unsigned)j->uid, strerror(errno));
		close(fd);
		return -EPERM;
	}
	close(fd);
	return 0;
}

/* An O_PATH fd of path, no component a symlink; st filled. */
static int jail_open_src(struct jail *j, const char *path, const char *what, struct stat *st)
{
	char name[NAME_MAX + 1];
	const char *last;
	int dfd, fd, r;

	dfd = fsutil_open_parent(what, path, &last, j->err, j->errlen);
	if (dfd < 0)
		return dfd;
	r = jail_name(j, last, name, sizeof(name), what, path);
	fd = r ? r : openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (!r && fd < 0)
		r = -errno;
	close(dfd);
	if (!r && fstat(fd, st))
		r = -errno;
	if (!r && S_ISLNK(st->st_mode))
		r = -ELOOP;
	if (!r)
		return fd;
	if (fd >= 0)
		close(fd);
	snprintf(j->err, j->errlen, "jail: %s %s: %s", what, path,
		 r == -ELOOP ? "is a symbolic link" : strerror(-r));
	return r;
}

/* DIR and every directory above it: root's, writable by nobody else (a world-writable one only
 * with the sticky bit, as /tmp), no symlink. Returns DIR's fd (O_PATH). */
static int jail_open_dir(struct jail *j)
{
	const char *p = j->dir;
	char comp[NAME_MAX + 1];
	struct stat st;
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC), nfd;
	unsigned depth = 0;
	bool last = false;

	if (fd < 0)
		goto fail;
	while (!last) {
		size_t n;

		if (fstat(fd, &st))
			goto fail;
		while (*p == '/')
			p++;
		n = strcspn(p, "/");
		last = !p[n + strspn(p + n, "/")];
		if (!n)
			break; /* "/" itself: refused below */
		if (st.st_uid || ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))) {
			snprintf(j->err, j->errlen,
				 "jail: %s: a directory above it is owned by uid %u or writable "
				 "by others (mode %o): DIR and every directory above it must be "
				 "root's and writable by root only",
				 j->dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
			close(fd);
			return -EACCES;
		}
		if (n >= sizeof(comp) || (n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.')) {
			snprintf(j->err, j->errlen, "jail: %s: '.', '..' or a long name", j->dir);
			close(fd);
			return -EINVAL;
		}
		memcpy(comp, p, n);
		comp[n] = 0;
		p += n;
		depth++;
		nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = nfd;
		if (fd < 0)
			goto fail;
	}
	if (fstat(fd, &st))
		goto fail;
	if (!depth) {
		snprintf(j->err, j->errlen, "jail: %s: not a directory other than /", j->dir);
		close(fd);
		return -EINVAL;
	}
	if (st.st_uid || (st.st_mode & 022)) {
		snprintf(j->err, j->errlen,
			 "jail: %s: owned by uid %u, mode %o: DIR must be root's and writable by "
			 "root only",
			 j->dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
		close(fd);
		return -EACCES;
	}
	return fd;
fail:
	snprintf(j->err, j->errlen, "jail: %s: %s", j->dir,
		 errno == ENOTDIR ? "not a directory other than / (or a symbolic link on the way)"
				  : strerror(errno));
	if (fd >= 0)
		close(fd);
	return -errno;
}

/* mkdir -p of rel (relative, components already checked) inside the tmpfs: the fd of the last. */
static int jail_mkdirs(struct jail *j, const char *rel, size_t len)
{
	char comp[NAME_MAX + 1];
	int fd = fcntl(j->rootfd, F_DUPFD_CLOEXEC, 3), nfd;
	size_t i = 0;

	while (fd >= 0 && i < len) {
		size_t n;

		while (i < len && rel[i] == '/')
			i++;
		n = strcspn(rel + i, "/");
		if (n > len - i)
			n = len - i;
		if (!n)
			break;
		if (n >= sizeof(comp)) {
			close(fd);
			return -ENAMETOOLONG;
		}
		memcpy(comp, rel + i, n);
		comp[n] = 0;
		i += n;
		if (mkdirat(fd, comp, 0755) && errno != EEXIST) {
			nfd = -errno;
			close(fd);
			return nfd;
		}
		nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = nfd;
	}
	return fd < 0 ? -errno : fd;
}

/* Binds s at the same path inside the jail, from its fd: a clone of the source's mount made
 * read-only (unless rw), nosuid and nodev, moved onto a placeholder the jail created. */
static int jail_bind(struct jail *j, struct jail_src *s)
{
	struct mount_attr ma = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
					    (s->rw ? 0 : MOUNT_ATTR_RDONLY)};
	const char *base = strrchr(s->path, '/') + 1;
	int dfd, tfd = -1, tree = -1, fd, r = 0;
	struct stat st;

	dfd = jail_mkdirs(j, s->path + 1, (size_t)(base - s->path - 1));
	if (dfd < 0) {
		r = dfd;
		goto out;
	}
	if (fstat(s->fd, &st)) {
		r = -errno;
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		if (mkdirat(dfd, base, 0755) && errno != EEXIST)
			r = -errno;
	} else {
		fd = openat(dfd, base, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			r = -errno;
		else
			close(fd);
	}
	if (!r)
		tfd = openat(dfd, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (!r && tfd < 0)
		r = -errno;
	if (!r)
		tree = open_tree(s->fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (!r && (tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH, &ma, sizeof(ma)) ||
		   move_mount(tree, "", tfd, "", JAIL_MNT_FLAG)))
		r = -errno;
out:
	if (r)
		snprintf(j->err, j->errlen, "jail: %s %s: binding it in: %s", s->what, s->path,
			 strerror(-r));
	if (dfd >= 0)
		close(dfd);
	if (tfd >= 0)
		close(tfd);
	if (tree >= 0)
		close(tree);
	return r;
}

/* /dev/kvm as a node of the jail's own, owned by its user (the host's node is unchanged). */
static int jail_kvm(struct jail *j)
{
	struct stat st;
	int r = 0, dfd, fd, kfd;

	fd = jail_open_src(j, "/dev/kvm", "kvm device", &st);
	if (fd < 0)
		return fd;
	close(fd);
	if (!S_ISCHR(st.st_mode)) {
		snprintf(j->err, j->errlen, "jail: /dev/kvm: not a character device");
		return -ENODEV;
	}
	dfd = jail_mkdirs(j, "dev", 3);
	if (dfd < 0)
		r = dfd;
	else if (mknodat(dfd, "kvm", S_IFCHR | 0600, st.st_rdev))
		r = -errno;
	if (!r) {
		kfd = openat(dfd, "kvm", O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (kfd < 0 || fchownat(kfd, "", j->uid, j->gid, AT_EMPTY_PATH))
			r = -errno;
		if (kfd >= 0)
			close(kfd);
	}
	if (dfd >= 0)
		close(dfd);
	if (r)
		snprintf(j->err, j->errlen, "jail: /dev/kvm: %s", strerror(-r));
	return r;
}

/* A new file system instance mounted on dirfd: tmpfs (the root) or proc. The mount's fd, or
 * -errno. */
static int jail_mount_fs(const char *type, const char *size, unsigned attr, int dirfd)
{
	int fs = fsopen(type, FSOPEN_CLOEXEC), m = -1, r = 0;

	if (fs < 0)
		return -errno;
	if ((size && (fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) ||
		      fsconfig(fs, FSCONFIG_SET_STRING, "size", size, 0))) ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0))
		r = -errno;
	if (!r) {
		m = fsmount(fs, FSMOUNT_CLOEXEC, attr);
		if (m < 0 || move_mount(m, "", dirfd, "", JAIL_MNT_FLAG))
			r = -errno;
	}
	close(fs);
	if (r && m >= 0)
		close(m);
	return r ? r : m;
}

/* The allowed directory found at its path in the jail's namespace is the one held since start:
 * else whoever renamed it would choose what the API's files become. */
static int jail_same_dir(struct jail *j, const struct stat *st)
{
	struct stat held;

	if (!fstat(j->allowed_fd, &held) && S_ISDIR(st->st_mode) && held.st_dev == st->st_dev &&
	    held.st_ino == st->st_ino)
		return 0;
	snprintf(j->err, j->errlen,
		 "jail: allowed directory %s: no longer the directory lvmm "
		 "opened at start",
		 j->allowed);
	return -ESTALE;
}

/* The held allowed directory's fd number now names the bound one, inside the jail's tree. */
static int jail_allowed_fd(struct jail *j)
{
	int fd = jail_mkdirs(j, j->allowed + 1, strlen(j->allowed + 1));

	if (fd < 0 || dup3(fd, j->allowed_fd, O_CLOEXEC) < 0) {
		int e = fd < 0 ? -fd : errno;

		snprintf(j->err, j->errlen, "jail: allowed directory %s: %s", j->allowed,
			 strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	close(fd);
	return 0;
}

/* In the child: the new root, then the user drop. Every step is on a file descriptor: DIR or a
 * parent renamed or swapped for a symlink meanwhile changes nothing. */
static int jail_build(struct jail *j)
{
	struct rlimit core = {0, 0}, nofile = {JAIL_NOFILE, JAIL_NOFILE};
	unsigned i;
	int r = 0, dirfd, pdir, pfd;
	struct stat st;

	/* Nothing mounted here propagates back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		snprintf(j->err, j->errlen, "jail: private mounts: %s", strerror(errno));
		return -errno;
	}
	/* Opened here, in this mount namespace: mounts are only made on and from its own. */
	dirfd = jail_open_dir(j);
	if (dirfd < 0)
		return dirfd;
	for (i = 0; i < j->nsrc && !r; i++) {
		j->src[i].fd = jail_open_src(j, j->src[i].path, j->src[i].what, &st);
		if (j->src[i].fd < 0)
			r = j->src[i].fd;
		else if (j->src[i].path == j->allowed)
			r = jail_same_dir(j, &st);
		else if (j->src[i].path == j->vsock_dir &&
			 (st.st_dev != j->vsock_dir_st.st_dev ||
			  st.st_ino != j->vsock_dir_st.st_ino || (st.st_mode & 022))) {
			snprintf(j->err, j->errlen,
				 "jail: vsock socket directory %s: no longer the directory checked",
				 j->vsock_dir);
			r = -ESTALE;
		}
	}
	if (r)
		return r;
	j->rootfd = jail_mount_fs("tmpfs", "1m", MOUNT_ATTR_NOSUID, dirfd);
	close(dirfd);
	if (j->rootfd < 0) {
		snprintf(j->err, j->errlen, "jail: tmpfs on %s: %s", j->dir, strerror(-j->rootfd));
		return j->rootfd;
	}
	jail_test_pause("jail-mounted");
	for (i = 0; i < j->nsrc && !r; i++) {
		r = jail_bind(j, &j->src[i]);
		close(j->src[i].fd);
	}
	if (!r)
		r = jail_kvm(j);
	if (!r && j->allowed)
		r = jail_allowed_fd(j);
	if (r)
		return r;
	/* This PID namespace's /proc: thread names, fds; nothing of the host's processes. */
	pdir = jail_mkdirs(j, "proc", 4);
	pfd = pdir < 0
		  ? pdir
		  : jail_mount_fs("proc", NULL,
				  MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, pdir);
	if (pdir >= 0)
		close(pdir);
	if (pfd < 0) {
		snprintf(j->err, j->errlen, "jail: /proc: %s", strerror(-pfd));
		return pfd;
	}
	close(pfd);
	/* The old root is stacked under the new one and detached: nothing else stays reachable. */
	if (fchdir(j->rootfd) || syscall(SYS_pivot_root, ".", ".") || umount2(".", MNT_DETACH) ||
	    chdir("/")) {
		snprintf(j->err, j->errlen, "jail: pivot_root into %s: %s", j->dir,
			 strerror(errno));
		return -errno;
	}
	close(j->rootfd);
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID, NULL)) {
		snprintf(j->err, j->errlen, "jail: read-only root: %s", strerror(errno));
		return -errno;
	}
	if (sethostname("lvmm", 4) || setrlimit(RLIMIT_CORE, &core) ||
	    setrlimit(RLIMIT_NOFILE, &nofile)) {
		snprintf(j->err, j->errlen, "jail: hostname or rlimits: %s", strerror(errno));
		return -errno;
	}
	if (setgroups(0, NULL) || setresgid(j->gid, j->gid, j->gid) ||
	    setresuid(j->uid, j->uid, j->uid) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		snprintf(j->err, j->errlen, "jail: dropping to uid %u gid %u: %s", (unsigned)j->uid,
			 (unsigned)j->gid, strerror(errno));
		return -errno;
	}
	return 0;
}

/* LVMM_JAIL_CGROUP: the child joins it before it does anything. */
static int jail_cgroup(pid_t pid, char *err, unsigned errlen)
{
	const char *cg = getenv("LVMM_JAIL_CGROUP");
	char path[PATH_MAX];
	FILE *f;
	int bad;

	if (!cg || !*cg)
		return 0;
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	f = fopen(path, "we");
	if (!f) {
		snprintf(err, errlen, "jail: cgroup %s: %s", path, strerror(errno));
		return -errno;
	}
	bad = fprintf(f, "%d\n", (int)pid) < 0;
	bad |= fclose(f) != 0;
	if (bad) {
		snprintf(err, errlen, "jail: cgroup %s: cannot add pid %d: %s", path, (int)pid,
			 strerror(errno));
		return -EIO;
	}
	return 0;
}

/* A socket lvmm listened on before the jail (the API's, the vsock device's): its directory,
 * opened by the outer process before the child builds the jail (a pivot_root moves the root of
 * both, as they share the mount namespace), and the socket as made, to remove it (and only it)
 * once the VM process is gone. dfd -1 when there is none. */
struct jail_sock {
	int dfd;
	char name[NAME_MAX + 1];
	struct stat made;
};

/* made (the socket lvmm made at path, as lstat'ed then) is kept for jail_sock_open. */
static void jail_sock_note(struct jail_sock *s, const char *path, const struct stat *made)
{
	s->dfd = -1;
	memset(&s->made, 0, sizeof(s->made));
	if (path && made && S_ISSOCK(made->st_mode))
		s->made = *made;
}

static void jail_sock_open(struct jail_sock *s, const char *path)
{
	char err[256];
	const char *last;
	size_t n;

	s->dfd = -1;
	if (!path || !s->made.st_ino)
		return;
	s->dfd = fsutil_open_parent("socket", path, &last, err, sizeof(err));
	if (s->dfd < 0)
		return;
	n = strcspn(last, "/");
	if (!n || n >= sizeof(s->name)) {
		close(s->dfd);
		s->dfd = -1;
		return;
	}
	memcpy(s->name, last, n);
	s->name[n] = 0;
}

/* Removed once the VM process is gone, if that name is still the socket lvmm made. */
static void jail_sock_unlink(struct jail_sock *s)
{
	struct stat st;

	if (s->dfd < 0)
		return;
	if (!fstatat(s->dfd, s->name, &st, AT_SYMLINK_NOFOLLOW) && S_ISSOCK(st.st_mode) &&
	    st.st_ino == s->made.st_ino && st.st_dev == s->made.st_dev)
		unlinkat(s->dfd, s->name, 0);
	close(s->dfd);
	s->dfd = -1;
}

/* The outer process keeps only what waiting needs: signalling the jail's user (CAP_KILL) and
 * removing the socket from a directory it may not own (CAP_DAC_OVERRIDE); no new privileges. */
static void jail_outer_caps(void)
{
	const unsigned long keep = (1UL << CAP_KILL) | (1UL << CAP_DAC_OVERRIDE);
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {{0}};
	int c;

	for (c = 0; prctl(PR_CAPBSET_READ, c, 0, 0, 0) >= 0; c++)
		if (!(keep & (1UL << c)))
			prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
	d[0].effective = d[0].permitted = (uint32_t)keep;
	if (syscall(SYS_capset, &h, d) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		fprintf(stderr, "lvmm: jail: outer process keeps its capabilities: %s\n",
			strerror(errno));
}

/* The outer process: signals go to the jailed one, its status becomes ours. */
static void __attribute__((noreturn))
jail_wait(pid_t pid, const sigset_t *set, struct jail_sock *socks, unsigned nsocks)
{
	int st;

	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(set, &si);

		if (sig == SIGCHLD || sig < 0) {
			if (waitpid(pid, &st, WNOHANG) == pid)
				break;
			continue;
		}
		kill(pid, sig);
	}
	for (unsigned i = 0; i < nsocks; i++)
		jail_sock_unlink(&socks[i]);
	if (WIFEXITED(st))
		exit(WEXITSTATUS(st));
	fprintf(stderr, "lvmm: jail: the VM process ended by signal %d\n", WTERMSIG(st));
	exit(128 + WTERMSIG(st));
}

/* Every fd from 3 up but the ones in keep (a VM's held allowed directory, its API socket). */
static int jail_close_fds(const int *keep, unsigned nkeep)
{
	int k[JAIL_MAX_KEEP], from = 3;
	unsigned i, n = 0;

	for (i = 0; i < nkeep && n < JAIL_MAX_KEEP; i++)
		if (keep[i] >= 3)
			k[n++] = keep[i];
	for (i = 1; i < n; i++) /* insertion sort: two or three entries */
		for (unsigned m = i; m && k[m - 1] > k[m]; m--) {
			int t = k[m];

			k[m] = k[m - 1];
			k[m - 1] = t;
		}
	for (i = 0; i < n; i++) {
		if (k[i] > from && syscall(SYS_close_range, (unsigned)from, (unsigned)k[i] - 1, 0U))
			return -errno;
		from = k[i] + 1;
	}
	return syscall(SYS_close_range, (unsigned)from, ~0U, 0U) ? -errno : 0;
}

/* A file bound in: absolute and symlink-free by now (jail_abs, then the walks). */
static void jail_add(struct jail *j, const char *path, bool rw, const char *what)
{
	if (path[0] && j->nsrc < JAIL_MAX_SRC)
		j->src[j->nsrc++] =
		    (struct jail_src){.path = path, .what = what, .rw = rw, .fd = -1};
}

/* name is the socket's own or NAME_<port>: what one VM's vsock directory may hold. */
static bool jail_vsock_name_ok(const char *name, const char *base)
{
	size_t n = strlen(base);

	if (!strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, base))
		return true;
	if (strncmp(name, base, n) || name[n] != '_' || !name[n + 1])
		return false;
	return strspn(name + n + 1, "0123456789") == strlen(name + n + 1);
}

/* --vsock in a jail: the socket was listened on before it (cfg->vsock.listen_fd); its directory
 * is bound in read-only, where the guest's connections to PATH_<port> are made, as the jail's
 * user. It must be one the host's users cannot write to but its owner (not /tmp: all of it
 * would be in the jail), and this VM's alone: nothing in it but PATH and PATH_<port> sockets
 * (another VM's sockets there would be reachable from this jail). */
static int jail_vsock_dir(struct jail *j, struct vm_config *cfg)
{
	char *path = cfg->vsock.socket, base[NAME_MAX + 1];
	const char *last;
	struct stat st = {0};
	struct dirent *de;
	size_t n;
	int r, dfd, lfd;
	DIR *d;

	if (!cfg->vsock.has_listen_fd) {
		snprintf(j->err, j->errlen, "jail: vsock %s: not listened on before the jail",
			 path);
		return -EINVAL;
	}
	r = jail_abs(j, path, sizeof(cfg->vsock.socket), "vsock socket");
	if (r)
		return r;
	dfd = fsutil_open_parent("vsock socket", path, &last, j->err, j->errlen);
	if (dfd < 0)
		return dfd;
	r = fstat(dfd, &st) ? -errno : 0;
	for (n = (size_t)(last - path); n && path[n - 1] == '/'; n--)
		;
	if (r || !n || (st.st_mode & 022)) {
		close(dfd);
		snprintf(j->err, j->errlen,
			 "jail: vsock socket %s: its directory is bound into the jail, so it must "
			 "be a directory other than / that only its owner may write to (mode %o)",
			 path, (unsigned)(st.st_mode & 07777));
		return -EACCES;
	}
	r = jail_name(j, last, base, sizeof(base), "vsock socket", path);
	lfd = r ? -1 : openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(dfd);
	d = lfd >= 0 ? fdopendir(lfd) : NULL;
	if (!d) {
		if (lfd >= 0)
			close(lfd);
		if (!r)
			snprintf(j->err, j->errlen,
				 "jail: vsock socket %s: listing its directory: %s", path,
				 strerror(errno));
		return r ? r : -errno;
	}
	while ((de = readdir(d)))
		if (!jail_vsock_name_ok(de->d_name, base)) {
			snprintf(
			    j->err, j->errlen,
			    "jail: vsock socket %s: its directory, bound into the jail, holds "
			    "'%s': give each VM a directory of its own (only %s and %s_<port>)",
			    path, de->d_name, base, base);
			closedir(d);
			return -EEXIST;
		}
	closedir(d);
	memcpy(j->vsock_dir, path, n); /* path is shorter than vsock_dir */
	j->vsock_dir[n] = 0;
	j->vsock_dir_st = st;
	return 0;
}

int jail_enter(struct vm_config *cfg, const struct jail_opts *o, char *err, unsigned errlen)
{
	struct jail j = {.err = err, .errlen = errlen, .rootfd = -1, .allowed_fd = -1};
	struct jail_sock socks[2];
	struct stat api_st;
	sigset_t set, old;
	unsigned i;
	int r, sync[2], dfd;
	char go = 0;
	pid_t pid;

	if (geteuid()) {
		snprintf(err, errlen, "jail: --jail %s needs root (namespaces, mounts)", o->dir);
		return -EPERM;
	}
	if (snprintf(j.dir, sizeof(j.dir), "%s", o->dir) >= (int)sizeof(j.dir) ||
	    jail_abs(&j, j.dir, sizeof(j.dir), "directory"))
		return -ENAMETOOLONG;
	/* Checked here for a plain message; opened again, the same way, in the child. */
	dfd = jail_open_dir(&j);
	if (dfd < 0)
		return dfd;
	close(dfd);
	/* Never a uid or gid of the host's own: 0 would be root's files, a shared one another
	 * jail's or user's. */
	j.uid = o->uid_set ? o->uid : JAIL_UID_BASE + (uid_t)getpid();
	j.gid = o->uid_set ? o->gid : j.uid;
	if (!j.uid || !j.gid || j.uid == (uid_t)-1 || j.gid == (gid_t)-1) {
		snprintf(err, errlen, "jail: uid %u gid %u: neither may be 0 (or -1)",
			 (unsigned)j.uid, (unsigned)j.gid);
		return -EINVAL;
	}
	/* (a VMM without a VM, --api-socket alone, has no devices: its options wait) */
	if (cfg->has_vsock && cfg->kernel[0]) {
		r = jail_vsock_dir(&j, cfg);
		if (r)
			return r;
	}
	for (i = 0; i < cfg->nfs && i < CONFIG_MAX_FS && cfg->kernel[0]; i++)
		if (!cfg->fs[i].has_fd) {
			/* the back end's socket is not reachable inside */
			snprintf(err, errlen, "jail: fs %s: not connected before the jail",
				 cfg->fs[i].socket);
			return -EINVAL;
		}
	r = jail_abs(&j, cfg->kernel, sizeof(cfg->kernel), "kernel");
	if (!r)
		r = jail_abs(&j, cfg->initramfs, sizeof(cfg->initramfs), "initramfs");
	if (!r && cfg->serial == SERIAL_FILE) {
		r = jail_abs(&j, cfg->serial_file, sizeof(cfg->serial_file), "serial file");
		if (!r)
			r = jail_precreate(&j, cfg->serial_file, "serial file");
	}
	for (i = 0; i < cfg->nvnvme && !r; i++) {
		struct vnvme_config *v = &cfg->vnvme[i];

		r = jail_abs(&j, v->path, sizeof(v->path), "vnvme backing");
		if (!r && v->path[0] && v->size && !v->readonly)
			r = jail_precreate(&j, v->path, "vnvme backing");
	}
	for (i = 0; i < cfg->ndisks && i < CONFIG_MAX_DISKS && !r; i++)
		r = jail_abs(&j, cfg->disks[i].path, sizeof(cfg->disks[i].path), "disk image");
	if (r) {
		if (!err[0])
			snprintf(err, errlen, "jail: preparing files: %s", strerror(-r));
		return r;
	}
	jail_add(&j, cfg->kernel, false, "kernel");
	jail_add(&j, cfg->initramfs, false, "initramfs");
	if (cfg->serial == SERIAL_FILE)
		jail_add(&j, cfg->serial_file, true, "serial file");
	for (i = 0; i < cfg->nvnvme; i++)
		jail_add(&j, cfg->vnvme[i].path, !cfg->vnvme[i].readonly, "vnvme backing");
	for (i = 0; i < cfg->ndisks && i < CONFIG_MAX_DISKS; i++)
		jail_add(&j, cfg->disks[i].path, !cfg->disks[i].readonly, "disk image");
	/* Each SSD's socket, not the directory of all of them (path sockets work across network
	 * namespaces); only an SSD served now can be reached. */
	for (i = 0; i < cfg->nvnvme && i < CONFIG_MAX_VNVME; i++) {
		struct stat st;

		/* an SSD the kernel module serves has no socket: nothing to bind */
		if (cfg->vnvme[i].ssd[0] && !strchr(cfg->vnvme[i].ssd, '/') &&
		    !lio_sock_path(cfg->vnvme[i].ssd, j.ssd[i], sizeof(j.ssd[i])) &&
		    !lstat(j.ssd[i], &st) && S_ISSOCK(st.st_mode))
			jail_add(&j, j.ssd[i], true, "ssd socket");
	}
	/* Directories last: a file bound after one would get its placeholder in the host's
	 * directory. Guests' connections to PATH_<port> are made in this one. */
	if (j.vsock_dir[0]) {
		size_t n = strlen(j.vsock_dir);

		for (i = 0; i < j.nsrc; i++)
			if (!strncmp(j.src[i].path, j.vsock_dir, n) && j.src[i].path[n] == '/') {
				/* read-only in there, and bound over */
				snprintf(err, errlen,
					 "jail: %s %s lies in the vsock socket's directory %s, "
					 "which is bound into the jail read-only: keep the VM's "
					 "files elsewhere",
					 j.src[i].what, j.src[i].path, j.vsock_dir);
				return -EINVAL;
			}
		jail_add(&j, j.vsock_dir, false, "vsock socket directory");
	}
	if (o->allowed_dir && o->allowed_dir[0] == '/' && o->allowed_fd >= 0) {
		j.allowed = o->allowed_dir;
		j.allowed_fd = o->allowed_fd;
		jail_add(&j, j.allowed, true, "allowed directory");
	}
	/* the sockets lvmm made, to remove them (and only them) when the VM process is gone */
	if (!o->api_socket || lstat(o->api_socket, &api_st))
		memset(&api_st, 0, sizeof(api_st));
	jail_sock_note(&socks[0], o->api_socket, &api_st);
	jail_sock_note(&socks[1], j.vsock_dir[0] ? cfg->vsock.socket : NULL, &o->vsock_made);
	/* No inherited fd crosses into the jail but the ones the caller holds for the VM. */
	fflush(NULL);
	r = jail_close_fds(o->keep_fds, o->nkeep);
	if (r) {
		snprintf(err, errlen, "jail: close_range: %s", strerror(-r));
		return r;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, &old);
	if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)) {
		snprintf(err, errlen, "jail: unshare: %s", strerror(errno));
		sigprocmask(SIG_SETMASK, &old, NULL);
		return -errno;
	}
	if (pipe2(sync, O_CLOEXEC)) {
		snprintf(err, errlen, "jail: pipe: %s", strerror(errno));
		return -errno;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "jail: fork: %s", strerror(errno));
		return -errno;
	}
	if (pid) {
		/* before the go: once the child pivots, our root is the jail's too */
		jail_sock_open(&socks[0], o->api_socket);
		jail_sock_open(&socks[1], j.vsock_dir[0] ? cfg->vsock.socket : NULL);

		close(sync[0]);
		for (i = 0; i < o->nkeep; i++)
			if (o->keep_fds[i] >= 3)
				close(o->keep_fds[i]);
		r = jail_cgroup(pid, err, errlen);
		if (r) {
			fprintf(stderr, "lvmm: %s\n", err);
			kill(pid, SIGKILL);
		} else if (write(sync[1], "g", 1) != 1) {
			kill(pid, SIGKILL);
		}
		close(sync[1]);
		jail_outer_caps();
		jail_wait(pid, &set, socks, 2);
	}
	close(sync[1]);
	/* lvmm stops when the outer process goes (it forwards the signals the user sends). Set
	 * before the wait: an outer process gone before it closed its end, and the read sees EOF.
	 */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (read(sync[0], &go, 1) != 1 || go != 'g')
		_exit(1);
	close(sync[0]);
	r = jail_build(&j);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return r;
}
