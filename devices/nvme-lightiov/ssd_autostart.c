/* softssd auto-start for `--vnvme NAME:SIZE`: a sparse backing under the state directory, a
 * supervisor that stops the daemon when no VM session is left, and the wait until it serves;
 * for the API's VMs (created under seccomp) a helper forked beforehand does the starting. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/lio_client.h"
#include "ssd_autostart.h"

static int mkdirs(char *path)
{
	char *p;

	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(path, 0755) && errno != EEXIST) {
			*p = '/';
			return -errno;
		}
		*p = '/';
	}
	if (mkdir(path, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

int ssd_state_dir(char *buf, size_t len)
{
	const char *e = getenv("LVMM_STATE_DIR"), *x = getenv("XDG_STATE_HOME");
	const char *h = getenv("HOME");
	int n;

	if (e && *e)
		n = snprintf(buf, len, "%s", e);
	else if (geteuid() == 0)
		n = snprintf(buf, len, "/var/lib/lvmm");
	else if (x && *x)
		n = snprintf(buf, len, "%s/lvmm", x);
	else if (h && *h)
		n = snprintf(buf, len, "%s/.local/state/lvmm", h);
	else
		return -ENOENT;
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Whether something answers for name: a softssd socket, or the kernel module's node. */
static bool ssd_served(const char *name)
{
	struct lio_client *c;
	char dev[96], err[256];
	int r;

	snprintf(dev, sizeof(dev), "/dev/lightiov/%s", name);
	if (!access(dev, F_OK))
		return true;
	r = lio_client_connect(&c, name, "probe", NULL, err, sizeof(err));
	if (!r) {
		lio_client_close(c);
		return true;
	}
	/* Nobody listens: no socket, or a stale one. Any other failure is a daemon that answered
	 * and refused (too many clients, not this uid): served, and the VM's own connect says why.
	 */
	return r != -ENOENT && r != -ECONNREFUSED && r != -ENOTDIR;
}

/* The supervisor: runs the daemon, watches its sessions on one connection of its own, and
 * stops it after SSD_AUTO_IDLE_MS with no other session. Never returns. */
static void __attribute__((noreturn))
supervise(const char *name, char *const argv[], const char *log)
{
	struct lio_client *c = NULL;
	unsigned idle = 0;
	pid_t d;
	int fd, st;

	setsid();
	close_range(3, ~0U, 0);	 /* nothing of lvmm's (its callers' pipes above all) stays open */
	signal(SIGINT, SIG_IGN); /* a Ctrl-C meant for the VM leaves the shared SSD alone */
	signal(SIGHUP, SIG_IGN);
	fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	fd = open("/dev/null", O_RDONLY);
	if (fd >= 0)
		dup2(fd, 0);
	d = fork();
	if (d < 0)
		_exit(1);
	if (!d) {
		signal(SIGINT, SIG_DFL);
		execv(argv[0], argv);
		_exit(127);
	}
	for (;;) {
		struct lio_session_list l = {0};
		char err[256];

		sleep_ms(250);
		if (waitpid(d, &st, WNOHANG) == d)
			_exit(0); /* the daemon ended by itself (stopped, or lost the race) */
		if (!c && lio_client_connect(&c, name, "autostart", NULL, err, sizeof(err)))
			c = NULL;
		if (c && lio_client_session_list(c, &l)) {
			lio_client_close(c);
			c = NULL;
		}
		/* our own session is one of them */
		idle = c && l.total <= 1 ? idle + 250 : 0;
		if (idle >= SSD_AUTO_IDLE_MS)
			break;
	}
	printf("%s: no VM for %u ms: stopping the softssd lvmm started\n", name, SSD_AUTO_IDLE_MS);
	fflush(stdout);
	lio_client_close(c);
	kill(d, SIGTERM);
	waitpid(d, &st, 0);
	_exit(0);
}

static int ssd_start_one(const char *id, const char *name, uint64_t need, unsigned wait_ms,
			 char *err, unsigned errlen)
{
	char state[512], backing[600], log[600], size[32], exe[512];
	char *argv[] = {exe,	 "ssd",	   "serve", (char *)name, "--backing",
			backing, "--size", size,    NULL};
	uint64_t sz = need + (1ULL << 30);
	ssize_t n;
	pid_t pid;
	int r, st;
	unsigned i;

	r = ssd_state_dir(state, sizeof(state) - 8);
	if (r) {
		snprintf(err, errlen,
			 "vnvme %s: ssd %s: no state directory for its backing ($LVMM_STATE_DIR)",
			 id, name);
		return r;
	}
	strcat(state, "/ssd");
	r = mkdirs(state);
	if (r) {
		snprintf(err, errlen,
			 "vnvme %s: ssd %s is not served, and its state directory %s: %s", id, name,
			 state, strerror(-r));
		return r;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		snprintf(err, errlen, "vnvme %s: ssd %s: no lvmm binary to start a softssd", id,
			 name);
		return -ENOENT;
	}
	exe[n] = 0;
	snprintf(backing, sizeof(backing), "%s/%s.img", state, name);
	snprintf(log, sizeof(log), "%s/%s.log", state, name);
	if (sz < SSD_AUTO_BACKING_MIN)
		sz = SSD_AUTO_BACKING_MIN;
	snprintf(size, sizeof(size), "%lluM", (unsigned long long)((sz + (1 << 20) - 1) >> 20));
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "vnvme %s: ssd %s: fork: %s", id, name, strerror(errno));
		return -errno;
	}
	if (!pid) {
		/* a second fork: the supervisor is nobody's child once lvmm exits */
		if (fork() == 0)
			supervise(name, argv, log);
		_exit(0);
	}
	waitpid(pid, &st, 0);
	for (i = 0; i < wait_ms / 25; i++) {
		if (ssd_served(name)) {
			fprintf(stderr,
				"lvmm: started softssd %s on %s (sparse, %s); it stops once no VM "
				"uses it (log %s)\n",
				name, backing, size, log);
			return 0;
		}
		sleep_ms(25);
	}
	snprintf(err, errlen,
		 "vnvme %s: ssd %s: the softssd lvmm started did not come up within %u ms (see %s)",
		 id, name, wait_ms, log);
	return -ETIMEDOUT;
}

/* ---- the helper of an API VMM: fork and exec on behalf of a process that may not ---- */

struct ssd_helper_req {
	char id[64];
	char name[sizeof(((struct vnvme_config *)0)->ssd)];
	uint64_t need;
	uint32_t wait_ms; /* what is left of the request's SSD_AUTO_API_WAIT_MS */
};

struct ssd_helper_rep {
	int32_t r;
	char err[300];
};

static pthread_mutex_t helper_lock = PTHREAD_MUTEX_INITIALIZER;
static int helper_fd = -1;

/* Starts name unless something serves it: here, or in the helper when there is one. */
static int ssd_ensure(const char *id, const char *name, uint64_t need, unsigned wait_ms, char *err,
		      unsigned errlen)
{
	struct ssd_helper_req q = {.need = need, .wait_ms = wait_ms};
	struct ssd_helper_rep a = {0};
	ssize_t n;
	int r;

	pthread_mutex_lock(&helper_lock);
	if (helper_fd < 0) {
		pthread_mutex_unlock(&helper_lock);
		return ssd_served(name)
			   ? 0
			   : ssd_start_one(id, name, need, SSD_AUTO_WAIT_MS, err, errlen);
	}
	snprintf(q.id, sizeof(q.id), "%s", id);
	snprintf(q.name, sizeof(q.name), "%s", name);
	n = send(helper_fd, &q, sizeof(q), MSG_NOSIGNAL);
	if (n == (ssize_t)sizeof(q))
		n = recv(helper_fd, &a, sizeof(a), 0);
	pthread_mutex_unlock(&helper_lock);
	if (n != (ssize_t)sizeof(a)) {
		snprintf(err, errlen,
			 "vnvme %s: ssd %s is not served; lvmm's softssd starter is gone", id,
			 name);
		return -EPIPE;
	}
	r = a.r;
	if (r) {
		a.err[sizeof(a.err) - 1] = 0;
		snprintf(err, errlen, "%s", a.err);
	}
	return r;
}

/* The helper runs unconfined on behalf of a confined process: it starts nothing but a softssd
 * named plainly (the name becomes a file name and an argument) of a size a file system holds. */
static bool helper_req_ok(const struct ssd_helper_req *q)
{
	size_t i, n = strlen(q->name);

	if (!n || q->name[0] == '-' || q->name[0] == '.' || q->need > SSD_AUTO_API_MAX ||
	    q->wait_ms > SSD_AUTO_API_WAIT_MS)
		return false;
	for (i = 0; i < n; i++) {
		char c = q->name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}

static void __attribute__((noreturn)) helper_main(int fd)
{
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGINT, SIG_IGN); /* the VMM's own signals; its exit ends the socket, and us */
	signal(SIGHUP, SIG_IGN);
	for (;;) {
		struct ssd_helper_req q;
		struct ssd_helper_rep a;
		ssize_t n = recv(fd, &q, sizeof(q), 0);

		if (n == 0 || (n < 0 && errno != EINTR))
			_exit(0);
		if (n != (ssize_t)sizeof(q))
			continue;
		q.id[sizeof(q.id) - 1] = q.name[sizeof(q.name) - 1] = 0;
		memset(&a, 0, sizeof(a));
		if (!helper_req_ok(&q)) {
			a.r = -EINVAL;
			snprintf(a.err, sizeof(a.err),
				 "vnvme %s: ssd name '%s' or size %llu refused for auto-start",
				 q.id, q.name, (unsigned long long)q.need);
		} else if (!ssd_served(q.name)) {
			a.r = ssd_start_one(q.id, q.name, q.need, q.wait_ms, a.err, sizeof(a.err));
		}
		if (send(fd, &a, sizeof(a), MSG_NOSIGNAL) < 0)
			_exit(0);
	}
}

int ssd_autostart_helper(char *err, unsigned errlen)
{
	pid_t parent = getpid(), pid;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		snprintf(err, errlen, "softssd starter: socketpair: %s", strerror(errno));
		return -errno;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "softssd starter: fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -errno;
	}
	if (!pid) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(0);
		/* only the standard streams (the VMM's log) and the request socket stay open */
		if (dup2(sv[1], 3) < 0)
			_exit(1);
		close_range(4, ~0U, 0);
		helper_main(3);
	}
	close(sv[1]);
	pthread_mutex_lock(&helper_lock);
	helper_fd = sv[0];
	pthread_mutex_unlock(&helper_lock);
	return 0;
}

static double mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* What a request may still wait: SSD_AUTO_API_WAIT_MS from t0 in all (the helper's callers
 * hold the API thread); 0 when spent. */
static unsigned wait_left(double t0)
{
	double left = SSD_AUTO_API_WAIT_MS - (mono_ms() - t0);

	return left > 0 ? (unsigned)left : 0;
}

int ssd_autostart(const struct vnvme_config *v, unsigned n, char *err, unsigned errlen)
{
	double t0 = mono_ms();
	unsigned i, j;
	int r;

	for (i = 0; i < n; i++) {
		const char *name = v[i].ssd;
		uint64_t need = 0;
		bool seen = false;
		char id[64];

		if (!name[0] || strchr(name, '/'))
			continue;
		for (j = 0; j < i; j++)
			seen |= !strcmp(v[j].ssd, name);
		if (seen)
			continue;
		for (j = i; j < n; j++)
			if (!strcmp(v[j].ssd, name))
				need += v[j].size;
		vnvme_id(&v[i], i, id, sizeof(id));
		r = ssd_ensure(id, name, need, wait_left(t0), err, errlen);
		if (r)
			return r;
	}
	return 0;
}

int ssd_autostart_vnvme(const struct vnvme_config *vc, unsigned idx, char *err, unsigned errlen)
{
	char id[64];

	if (!vc->ssd[0] || strchr(vc->ssd, '/'))
		return 0;
	vnvme_id(vc, idx, id, sizeof(id));
	return ssd_ensure(id, vc->ssd, vc->size, SSD_AUTO_API_WAIT_MS, err, errlen);
}
