/* lvmm run --jail DIR: namespaces, a tmpfs root on DIR with bind mounts of the VM's files only,
 * pivot_root, rlimits, closed fds and a uid/gid drop; the outer process only waits. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail.h"

#define JAIL_NOBODY 65534
#define JAIL_NOFILE 4096

struct jail {
	char root[PATH_MAX];
	uid_t uid;
	gid_t gid;
	char *err;
	unsigned errlen;
};

/* path made absolute in place: resolved if it exists, else its directory is. */
static int jail_abs(struct jail *j, char *path, size_t cap, const char *what)
{
	char res[PATH_MAX], dir[PATH_MAX], base[PATH_MAX];

	if (!path[0])
		return 0;
	if (!realpath(path, res)) {
		if (errno != ENOENT)
			goto fail;
		snprintf(dir, sizeof(dir), "%s", path);
		snprintf(base, sizeof(base), "%s", path);
		if (!realpath(dirname(dir), res))
			goto fail;
		if (strlen(res) + 1 + strlen(basename(base)) >= sizeof(res)) {
			errno = ENAMETOOLONG;
			goto fail;
		}
		strcat(res, "/");
		strcat(res, basename(base));
	}
	if (strlen(res) >= cap) {
		errno = ENAMETOOLONG;
		goto fail;
	}
	strcpy(path, res);
	return 0;
fail:
	snprintf(j->err, j->errlen, "jail: %s %s: %s", what, path, strerror(errno));
	return -errno;
}

/* A file the VM creates at boot exists beforehand (a bind mount needs a source), the jail's
 * user owning it as it would had it created it. */
static int jail_precreate(struct jail *j, const char *path, const char *what)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);

	if (fd < 0)
		return errno == EEXIST ? 0 : -errno;
	if (fchown(fd, j->uid, j->gid)) {
		snprintf(j->err, j->errlen, "jail: %s %s: chown to %u: %s", what, path,
			 (unsigned)j->uid, strerror(errno));
		close(fd);
		return -EPERM;
	}
	close(fd);
	return 0;
}

/* mkdir -p of root + dir (dir absolute). */
static int jail_mkdirs(struct jail *j, const char *dir)
{
	char p[PATH_MAX];
	size_t i, n = (size_t)snprintf(p, sizeof(p), "%s%s", j->root, dir);

	if (n >= sizeof(p))
		return -ENAMETOOLONG;
	for (i = strlen(j->root) + 1; i <= n; i++) {
		if (p[i] != '/' && p[i])
			continue;
		p[i] = 0;
		if (mkdir(p, 0755) && errno != EEXIST)
			return -errno;
		if (i < n)
			p[i] = '/';
	}
	return 0;
}

/* Binds src (file or directory) at the same path inside the jail; read-only unless rw. */
static int jail_bind(struct jail *j, const char *src, bool rw, const char *what)
{
	char dst[PATH_MAX], dir[PATH_MAX];
	struct stat st;
	int r, fd;

	if (!src[0])
		return 0;
	if (stat(src, &st)) {
		r = -errno;
		goto fail;
	}
	if ((size_t)snprintf(dst, sizeof(dst), "%s%s", j->root, src) >= sizeof(dst)) {
		r = -ENAMETOOLONG;
		goto fail;
	}
	snprintf(dir, sizeof(dir), "%s", src);
	r = jail_mkdirs(j, S_ISDIR(st.st_mode) ? src : dirname(dir));
	if (r)
		goto fail;
	if (!S_ISDIR(st.st_mode)) {
		fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			r = -errno;
			goto fail;
		}
		close(fd);
	}
	if (mount(src, dst, NULL, MS_BIND, NULL) ||
	    mount(NULL, dst, NULL,
		  MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | (rw ? 0 : MS_RDONLY), NULL)) {
		r = -errno;
		goto fail;
	}
	return 0;
fail:
	snprintf(j->err, j->errlen, "jail: %s %s: %s", what, src, strerror(-r));
	return r;
}

/* /dev/kvm as a node of the jail's own, owned by its user (the host's node is unchanged). */
static int jail_kvm(struct jail *j)
{
	char dst[PATH_MAX + 16];
	struct stat st;
	int r;

	if (stat("/dev/kvm", &st)) {
		r = -errno;
		goto fail;
	}
	r = jail_mkdirs(j, "/dev");
	snprintf(dst, sizeof(dst), "%s/dev/kvm", j->root);
	if (!r && (mknod(dst, S_IFCHR | 0600, st.st_rdev) || chown(dst, j->uid, j->gid)))
		r = -errno;
	if (!r)
		return 0;
fail:
	snprintf(j->err, j->errlen, "jail: /dev/kvm: %s", strerror(-r));
	return r;
}

/* In the child: the new root, then the user drop. */
static int jail_build(struct jail *j, struct vm_config *cfg, const struct jail_opts *o)
{
	char sockdir[PATH_MAX], proc[PATH_MAX + 8];
	struct rlimit core = {0, 0}, nofile = {JAIL_NOFILE, JAIL_NOFILE};
	unsigned i;
	int r;

	/* Nothing mounted here propagates back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("tmpfs", j->root, "tmpfs", MS_NOSUID, "mode=0755,size=1m")) {
		snprintf(j->err, j->errlen, "jail: tmpfs on %s: %s", j->root, strerror(errno));
		return -errno;
	}
	r = jail_bind(j, cfg->kernel, false, "kernel");
	if (!r)
		r = jail_bind(j, cfg->initramfs, false, "initramfs");
	if (!r && cfg->serial == SERIAL_FILE)
		r = jail_bind(j, cfg->serial_file, true, "serial file");
	for (i = 0; i < cfg->nvnvme && !r; i++)
		r = jail_bind(j, cfg->vnvme[i].path, !cfg->vnvme[i].readonly, "vnvme backing");
	/* SSD sockets (path sockets work across network namespaces) */
	for (i = 0; i < cfg->nvnvme && !r; i++)
		if (cfg->vnvme[i].ssd[0]) {
			const char *rd = getenv("LVMM_RUN_DIR");

			r = jail_bind(j, rd && *rd ? rd : "/run/lvmm", true,
				      "ssd socket directory");
			break;
		}
	if (!r && o->api_socket) {
		snprintf(sockdir, sizeof(sockdir), "%s", o->api_socket);
		r = jail_bind(j, dirname(sockdir), true, "api socket directory");
	}
	if (!r && o->allowed_dir && o->allowed_dir[0])
		r = jail_bind(j, o->allowed_dir, true, "allowed directory");
	if (!r)
		r = jail_kvm(j);
	if (r)
		return r;
	/* This PID namespace's /proc: thread names, fds; nothing of the host's processes. */
	snprintf(proc, sizeof(proc), "%s/proc", j->root);
	if (mkdir(proc, 0555) ||
	    mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL)) {
		snprintf(j->err, j->errlen, "jail: /proc: %s", strerror(errno));
		return -errno;
	}
	/* The old root is stacked under the new one and detached: nothing else stays reachable. */
	if (chdir(j->root) || syscall(SYS_pivot_root, ".", ".") || umount2(".", MNT_DETACH) ||
	    chdir("/")) {
		snprintf(j->err, j->errlen, "jail: pivot_root into %s: %s", j->root,
			 strerror(errno));
		return -errno;
	}
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

/* The outer process: signals go to the jailed one, its status becomes ours. */
static void __attribute__((noreturn)) jail_wait(pid_t pid, const sigset_t *set)
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
	if (WIFEXITED(st))
		exit(WEXITSTATUS(st));
	fprintf(stderr, "lvmm: jail: the VM process ended by signal %d\n", WTERMSIG(st));
	exit(128 + WTERMSIG(st));
}

int jail_enter(struct vm_config *cfg, const struct jail_opts *o, char *err, unsigned errlen)
{
	struct jail j = {.err = err, .errlen = errlen};
	sigset_t set, old;
	struct stat st;
	unsigned i;
	int r, sync[2];
	char go = 0;
	pid_t pid;

	if (geteuid()) {
		snprintf(err, errlen, "jail: --jail %s needs root (namespaces, mounts)", o->dir);
		return -EPERM;
	}
	if (!realpath(o->dir, j.root) || stat(j.root, &st)) {
		snprintf(err, errlen, "jail: %s: %s", o->dir, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode) || !strcmp(j.root, "/")) {
		snprintf(err, errlen, "jail: %s: not a directory other than /", o->dir);
		return -EINVAL;
	}
	j.uid = st.st_uid ? st.st_uid : JAIL_NOBODY;
	j.gid = st.st_uid ? st.st_gid : JAIL_NOBODY;
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
	if (r) {
		if (!err[0])
			snprintf(err, errlen, "jail: preparing files: %s", strerror(-r));
		return r;
	}
	/* No inherited fd crosses into the jail. */
	fflush(NULL);
	if (syscall(SYS_close_range, 3U, ~0U, 0U)) {
		snprintf(err, errlen, "jail: close_range: %s", strerror(errno));
		return -errno;
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
		close(sync[0]);
		r = jail_cgroup(pid, err, errlen);
		if (r) {
			fprintf(stderr, "lvmm: %s\n", err);
			kill(pid, SIGKILL);
		} else if (write(sync[1], "g", 1) != 1) {
			kill(pid, SIGKILL);
		}
		close(sync[1]);
		jail_wait(pid, &set);
	}
	close(sync[1]);
	if (read(sync[0], &go, 1) != 1 || go != 'g')
		_exit(1);
	close(sync[0]);
	/* lvmm stops when the outer process goes (it forwards the signals the user sends). */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	r = jail_build(&j, cfg, o);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return r;
}
