/* lvmm run --jail DIR as root: the bench guest boots from files bound into the jail, and the
 * running VM process is seen from outside in its own namespaces, root, user, limits and fds,
 * with only its own files (not their directories, not the API socket's) in its root. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static char dir[64], root[128], files[128], guest[256], console[256], disk[256], sock[256];

static void setup(void)
{
	char cmd[1024];

	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-jail-");
	ck_assert_int_eq(chmod(dir, 0755), 0);
	snprintf(root, sizeof(root), "%s/root", dir);
	snprintf(files, sizeof(files), "%s/files", dir);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	ck_assert_int_eq(mkdir(files, 0755), 0);
	snprintf(guest, sizeof(guest), "%s/guest.elf", files);
	snprintf(console, sizeof(console), "%s/console.log", files);
	snprintf(disk, sizeof(disk), "%s/disk.img", files);
	snprintf(sock, sizeof(sock), "%s/api.sock", files);
	snprintf(cmd, sizeof(cmd), "cp %s %s", testutil_bench_guest(), guest);
	ck_assert_int_eq(system(cmd), 0);
}

static void teardown(void)
{
	testutil_rmtree(dir);
}

/* Starts lvmm run --jail ... in the background; extra_fd stays open across the exec; uid NULL
 * for the default jail uid, else --jail-uid uid. */
static pid_t start(const char *mode, int extra_fd, const char *uid)
{
	char cmdline[64], serial[300], vnvme[300];
	pid_t pid;

	snprintf(cmdline, sizeof(cmdline), "bench.mode=%s", mode);
	snprintf(serial, sizeof(serial), "file=%s", console);
	snprintf(vnvme, sizeof(vnvme), "file=%s,size=1M", disk);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		char *argv[] = {(char *)testutil_lvmm(),
				"run",
				"--jail",
				root,
				"--kernel",
				guest,
				"--cmdline",
				cmdline,
				"--memory",
				"64M",
				"--serial",
				serial,
				"--vnvme",
				vnvme,
				"--api-socket",
				sock,
				uid ? "--jail-uid" : NULL,
				(char *)uid,
				NULL};

		if (extra_fd >= 0)
			fcntl(extra_fd, F_SETFD, 0);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* The jailed process: the only child of the outer lvmm. */
static pid_t jailed_child(pid_t outer)
{
	char path[64], buf[64] = "";

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)outer, (int)outer);
	for (int i = 0; i < 200; i++) {
		if (testutil_read_file(path, buf, sizeof(buf) - 1) > 0 && atoi(buf) > 0)
			return (pid_t)atoi(buf);
		testutil_sleep_ms(25);
	}
	ck_abort_msg("no jailed child of %d", (int)outer);
	return -1;
}

static char *proc_file(pid_t pid, const char *name)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	return testutil_slurp(path);
}

static void same_ns(pid_t pid, const char *ns, bool want_same)
{
	char a[64], b[64], la[64] = "", lb[64] = "";

	snprintf(a, sizeof(a), "/proc/%d/ns/%s", (int)pid, ns);
	snprintf(b, sizeof(b), "/proc/self/ns/%s", ns);
	ck_assert_int_gt(readlink(a, la, sizeof(la) - 1), 0);
	ck_assert_int_gt(readlink(b, lb, sizeof(lb) - 1), 0);
	ck_assert_msg(!strcmp(la, lb) == want_same, "%s namespace: %s against ours %s", ns, la, lb);
}

static int wait_exit(pid_t pid)
{
	int st = testutil_wait_limit(pid, "lvmm --jail", 20);

	return st;
}

START_TEST(test_jail_boots_guest)
{
	struct stat st;
	char *out;
	pid_t pid = start("hello", -1, NULL);
	int status = wait_exit(pid);

	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
	out = testutil_slurp(console);
	ck_assert_ptr_nonnull(out);
	ck_assert_msg(strstr(out, "hello from ring 3"), "console: %s", out);
	free(out);
	/* created for the jail's user, sized as asked: by default a uid of this jail's own
	 * (1500000000 + the outer lvmm's pid), not 65534 that every jail would share */
	ck_assert_int_eq(stat(disk, &st), 0);
	ck_assert_uint_eq(st.st_uid, 1500000000u + (unsigned)pid);
	ck_assert_uint_eq(st.st_gid, 1500000000u + (unsigned)pid);
	ck_assert_int_eq(st.st_size, 1 << 20);
	/* the host's view of DIR is untouched: the tmpfs root lived in the jail's namespace */
	DIR *d = opendir(root);
	struct dirent *e;
	unsigned n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(test_jail_confines)
{
	char marker[300], path[400], other[300], link[PATH_MAX], *s;
	struct testutil_run r;
	struct dirent *e;
	DIR *d;
	int mfd, status;
	pid_t outer, child;

	snprintf(marker, sizeof(marker), "%s/inherited-marker", dir);
	snprintf(other, sizeof(other), "%s/other-tenant.log", files);
	mfd = open(marker, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(mfd, 0);
	/* another tenant's file next to this VM's own: never visible inside */
	testutil_write_file(other, "other tenant\n", 13, 0644);
	outer = start("spin", mfd, "65534");
	close(mfd);
	child = jailed_child(outer);
	for (int i = 0; i < 200 && access(sock, F_OK); i++)
		testutil_sleep_ms(25);
	ck_assert_msg(!access(sock, F_OK), "no API socket %s from the jail", sock);
	/* the socket was made outside, its fd handed in: the API answers */
	for (int i = 0; i < 200; i++) {
		char *api[] = {"api", "--socket", sock, "info", NULL};

		testutil_run_lvmm(&r, api, NULL, NULL, 0, 10);
		if (WIFEXITED(r.status) && !WEXITSTATUS(r.status) && strstr(r.out, "Running"))
			break;
		testutil_sleep_ms(50);
	}
	ck_assert_msg(strstr(r.out, "Running"), "api info: %s %s", r.out, r.err);
	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)child, console);
	ck_assert_int_eq(access(path, F_OK), 0); /* its own file is there */
	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)child, other);
	ck_assert_int_ne(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)child, sock);
	ck_assert_int_ne(access(path, F_OK), 0);

	s = proc_file(child, "status");
	ck_assert_ptr_nonnull(s);
	ck_assert_msg(strstr(s, "\nUid:\t65534\t65534\t65534\t65534"), "status: %s", s);
	ck_assert_msg(strstr(s, "\nGid:\t65534\t65534\t65534\t65534"), "status: %s", s);
	ck_assert_msg(strstr(s, "\nNoNewPrivs:\t1"), "status: %s", s);
	ck_assert_msg(strstr(s, "\nSeccomp:\t2"), "status: %s", s);
	/* PID 1 of its own PID namespace */
	ck_assert_msg(strstr(s, "\nNSpid:\t") && strstr(strstr(s, "\nNSpid:\t"), "\t1\n"),
		      "status: %s", s);
	free(s);
	/* the outer process only waits: CAP_KILL and CAP_DAC_OVERRIDE, nothing else */
	s = proc_file(outer, "status");
	ck_assert_ptr_nonnull(s);
	ck_assert_msg(strstr(s, "\nCapEff:\t0000000000000022\n"), "outer status: %s", s);
	ck_assert_msg(strstr(s, "\nCapBnd:\t0000000000000022\n"), "outer status: %s", s);
	ck_assert_msg(strstr(s, "\nNoNewPrivs:\t1"), "outer status: %s", s);
	free(s);
	same_ns(child, "mnt", false);
	same_ns(child, "net", false);
	same_ns(child, "ipc", false);
	same_ns(child, "uts", false);
	same_ns(child, "pid", false);

	/* its root holds the VM's files only: no /etc, /usr, /bin, /home */
	snprintf(path, sizeof(path), "/proc/%d/root", (int)child);
	d = opendir(path);
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		ck_assert_msg(!strcmp(e->d_name, "dev") || !strcmp(e->d_name, "proc") ||
				  !strcmp(e->d_name, "tmp"),
			      "jail root holds %s", e->d_name);
	}
	closedir(d);
	snprintf(path, sizeof(path), "/proc/%d/root/etc/passwd", (int)child);
	ck_assert_int_ne(access(path, F_OK), 0);

	/* no inherited fd */
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)child);
	d = opendir(path);
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		char fdp[700];
		ssize_t n;

		snprintf(fdp, sizeof(fdp), "%s/%s", path, e->d_name);
		n = readlink(fdp, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		ck_assert_msg(!strstr(link, "inherited-marker"),
			      "fd %s -> %s crossed into the jail", e->d_name, link);
	}
	closedir(d);

	s = proc_file(child, "limits");
	ck_assert_ptr_nonnull(s);
	ck_assert_msg(strstr(s, "Max core file size        0"), "limits: %s", s);
	ck_assert_msg(strstr(s, "Max open files            4096"), "limits: %s", s);
	free(s);

	/* SIGTERM to the outer process reaches the VM, which stops in order */
	ck_assert_int_eq(kill(outer, SIGTERM), 0);
	status = wait_exit(outer);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
	ck_assert_int_ne(kill(child, 0), 0);
	/* the outer process removed the socket it made */
	ck_assert_int_ne(access(sock, F_OK), 0);
}
END_TEST

START_TEST(test_jail_cgroup)
{
	char cg[128], procs[160], *s;
	pid_t outer, child;
	int status;

	snprintf(cg, sizeof(cg), "/sys/fs/cgroup/pids/lvmm-jail-test-%d", (int)getpid());
	if (mkdir(cg, 0755)) {
		snprintf(cg, sizeof(cg), "/sys/fs/cgroup/lvmm-jail-test-%d", (int)getpid());
		snprintf(procs, sizeof(procs), "/sys/fs/cgroup/cgroup.controllers");
		if (access(procs, F_OK) || mkdir(cg, 0755)) {
			testutil_skip("jail: no writable cgroup hierarchy here");
			return;
		}
	}
	setenv("LVMM_JAIL_CGROUP", cg, 1);
	outer = start("spin", -1, NULL);
	unsetenv("LVMM_JAIL_CGROUP");
	child = jailed_child(outer);
	/* The outer process listens on the API socket before it starts the child, so the socket
	 * says nothing about the cgroup yet: wait (up to 10 s) for the child to be placed. */
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
	s = NULL;
	for (int i = 0; i < 400; i++) {
		free(s);
		s = testutil_slurp(procs);
		if (s && atoi(s) > 0)
			break;
		testutil_sleep_ms(25);
	}
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(atoi(s), child);
	free(s);
	kill(outer, SIGTERM);
	status = wait_exit(outer);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
	for (int i = 0; i < 100 && rmdir(cg); i++)
		testutil_sleep_ms(20);
}
END_TEST

/* --jail --vsock: the socket listened on before the jail goes with the device. The guest (the
 * bench guest ejects nothing) is asked to remove vsock0 while paused and the reboot completes it;
 * then nothing listens at PATH any more: a host program's connect is refused, not queued. */
START_TEST(test_jail_vsock_removed)
{
	char vs_dir[200], vs_sock[300], vs[320], cmd[1200], *out = NULL;
	char *argv[] = {"--jail",	   root,       "--kernel",     guest,	   "--cmdline",
			"bench.mode=spin", "--memory", "64M",	       "--serial", "off",
			"--vsock",	   vs,	       "--api-socket", sock,	   NULL};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	pid_t pid;
	int fd, status;

	snprintf(vs_dir, sizeof(vs_dir), "%s/vs", dir);
	ck_assert_int_eq(mkdir(vs_dir, 0755), 0);
	snprintf(vs_sock, sizeof(vs_sock), "%s/v.sock", vs_dir);
	snprintf(vs, sizeof(vs), "cid=3,socket=%s", vs_sock);
	memcpy(sa.sun_path, vs_sock, strlen(vs_sock) + 1);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		char *full[24] = {(char *)testutil_lvmm(), "run"};

		for (unsigned i = 0; argv[i]; i++)
			full[2 + i] = argv[i];
		execv(full[0], full);
		_exit(127);
	}
	for (int i = 0; i < 400 && access(sock, F_OK); i++)
		testutil_sleep_ms(25);
	ck_assert_int_eq(access(sock, F_OK), 0);
	/* listening: a connect is taken */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	snprintf(cmd, sizeof(cmd),
		 "L=%s; S=%s; $L api --socket $S pause && ! $L api --socket $S remove-device "
		 "vsock0 2>&1; $L api --socket $S resume && $L api --socket $S reboot && $L api "
		 "--socket $S info",
		 testutil_lvmm(), sock);
	ck_assert_int_eq(testutil_sh(cmd, &out), 0);
	ck_assert_msg(out && !strstr(out, "\"vsock\""), "vsock0 still in the config: %s",
		      out ? out : "");
	free(out);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ne(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_msg(errno == ECONNREFUSED, "connect: %s", strerror(errno));
	close(fd);
	snprintf(cmd, sizeof(cmd), "%s api --socket %s shutdown-vmm", testutil_lvmm(), sock);
	(void)!testutil_sh(cmd, NULL);
	status = wait_exit(pid);
	ck_assert_msg(WIFEXITED(status), "status %#x", status);
}
END_TEST

/* Refusals name what is wrong: not root is covered by the message; here a file as DIR, a
 * relative socket, a vsock socket in a directory others may write to (/tmp) or in the one that
 * holds the kernel (neither socket is left behind), and a virtio-fs back end nobody serves. */
START_TEST(test_jail_refusals)
{
	char vs_tmp[128], vs_files[300], vs_tmp_sock[96], vs_files_sock[280], fs[300];
	char *args1[] = {"run", "--jail", guest, "--kernel", guest, "--serial", "off", NULL};
	char *args2[] = {"run",	     "--jail",	 root,	"--api-socket",
			 "rel.sock", "--kernel", guest, NULL};
	char *args3[] = {"run",	     "--jail", root,	  "--kernel", guest,
			 "--serial", "off",    "--vsock", vs_tmp,     NULL};
	char *args4[] = {"run",	     "--jail", root,	  "--kernel", guest,
			 "--serial", "off",    "--vsock", vs_files,   NULL};
	char vs_own[300], vs_own_sock[280];
	char *args5[] = {"run", "--jail", root, "--kernel", guest,  "--serial",
			 "off", "--fs",	  fs,	"--vsock",  vs_own, NULL};
	struct testutil_run r;

	testutil_run_lvmm(&r, args1, NULL, NULL, 0, 10);
	ck_assert_int_eq(WEXITSTATUS(r.status), 1);
	ck_assert_msg(strstr(r.err, "not a directory"), "stderr: %s", r.err);
	testutil_run_lvmm(&r, args2, NULL, NULL, 0, 10);
	ck_assert_int_eq(WEXITSTATUS(r.status), 2);
	ck_assert_msg(strstr(r.err, "absolute"), "stderr: %s", r.err);

	snprintf(vs_tmp_sock, sizeof(vs_tmp_sock), "/tmp/lvmm-jail-vs-%d.sock", (int)getpid());
	snprintf(vs_tmp, sizeof(vs_tmp), "cid=3,socket=%s", vs_tmp_sock);
	testutil_run_lvmm(&r, args3, NULL, NULL, 0, 10);
	ck_assert_int_eq(WEXITSTATUS(r.status), 1);
	ck_assert_msg(strstr(r.err, "only its owner may write to"), "stderr: %s", r.err);
	ck_assert_int_ne(access(vs_tmp_sock, F_OK), 0);

	snprintf(vs_files_sock, sizeof(vs_files_sock), "%s/v.sock", files);
	snprintf(vs_files, sizeof(vs_files), "cid=3,socket=%s", vs_files_sock);
	testutil_run_lvmm(&r, args4, NULL, NULL, 0, 10);
	ck_assert_int_eq(WEXITSTATUS(r.status), 1);
	ck_assert_msg(strstr(r.err, "give each VM a directory of its own"), "stderr: %s", r.err);
	ck_assert_int_ne(access(vs_files_sock, F_OK), 0);

	/* the fs back end fails after the vsock socket was made: that socket goes again */
	snprintf(fs, sizeof(fs), "tag=share,socket=%s/nobody.sock", files);
	snprintf(vs_own_sock, sizeof(vs_own_sock), "%s/vs", dir);
	ck_assert_int_eq(mkdir(vs_own_sock, 0755), 0);
	snprintf(vs_own_sock, sizeof(vs_own_sock), "%s/vs/v.sock", dir);
	snprintf(vs_own, sizeof(vs_own), "cid=3,socket=%s", vs_own_sock);
	testutil_run_lvmm(&r, args5, NULL, NULL, 0, 10);
	ck_assert_int_eq(WEXITSTATUS(r.status), 1);
	ck_assert_msg(strstr(r.err, "nobody.sock") && strstr(r.err, "No such file"), "stderr: %s",
		      r.err);
	ck_assert_int_ne(access(vs_own_sock, F_OK), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("jail");
	TCase *tc = tcase_create("jail");

	if (geteuid()) {
		testutil_skip("jail: not root (namespaces and mounts need it)");
		return 0;
	}
	if (!testutil_kvm_usable()) {
		testutil_skip("jail: /dev/kvm not usable here");
		return 0;
	}
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_jail_boots_guest);
	tcase_add_test(tc, test_jail_confines);
	tcase_add_test(tc, test_jail_cgroup);
	tcase_add_test(tc, test_jail_refusals);
	tcase_add_test(tc, test_jail_vsock_removed);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
