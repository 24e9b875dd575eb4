/* lvmm run --jail against paths an unprivileged user can change: DIR swapped for a symlink right
 * after the tmpfs is mounted (LVMM_TEST_PAUSE stops lvmm there), a symlinked directory on the way
 * to a file the jail creates or binds in, a DIR that is not root's. Nothing lands outside. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ssdutil.h"
#include "testutil.h"

static char dir[64], root[128], files[128], victim[128], guest[256], console[256], fifo[128];

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-jailp-");
	ck_assert_int_eq(chmod(dir, 0755), 0);
	snprintf(root, sizeof(root), "%s/root", dir);
	snprintf(files, sizeof(files), "%s/files", dir);
	/* a directory only root may write: what the jail's builder must never write into */
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	snprintf(fifo, sizeof(fifo), "%s/pause", dir);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	ck_assert_int_eq(mkdir(files, 0755), 0);
	ck_assert_int_eq(mkdir(victim, 0700), 0);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	snprintf(guest, sizeof(guest), "%s/guest.elf", files);
	snprintf(console, sizeof(console), "%s/console.log", files);
	ck_assert_int_eq(testutil_system("cp %s %s", testutil_bench_guest(), guest), 0);
}

static void teardown(void)
{
	testutil_rmtree(dir);
}

static unsigned entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	unsigned n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static pid_t start(const char *jail, const char *kernel, const char *serial)
{
	char ser[300];
	pid_t pid;

	snprintf(ser, sizeof(ser), "file=%s", serial);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		char *argv[] = {(char *)testutil_lvmm(),
				"run",
				"--jail",
				(char *)jail,
				"--jail-uid",
				"65534",
				"--kernel",
				(char *)kernel,
				"--cmdline",
				"bench.mode=hello",
				"--memory",
				"64M",
				"--serial",
				ser,
				NULL};

		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* DIR becomes a symlink to victim just after lvmm mounted its tmpfs on it: every later step
 * (directories, placeholders, the kvm node, its chown, pivot_root) still lands in the tmpfs. */
START_TEST(test_dir_swapped_after_mount)
{
	char buf[32] = "", old[160], env[200];
	pid_t pid;
	int fd, st;
	char *out;

	snprintf(env, sizeof(env), "jail-mounted:%s", fifo);
	setenv("LVMM_TEST_PAUSE", env, 1);
	pid = start(root, guest, console);
	unsetenv("LVMM_TEST_PAUSE");
	fd = open(fifo, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(read(fd, buf, sizeof(buf) - 1), 0);
	close(fd);
	ck_assert_str_eq(buf, "jail-mounted");
	snprintf(old, sizeof(old), "%s.old", root);
	ck_assert_int_eq(rename(root, old), 0);
	ck_assert_int_eq(symlink(victim, root), 0);
	fd = open(fifo, O_WRONLY | O_CLOEXEC); /* lvmm goes on once this is closed */
	ck_assert_int_ge(fd, 0);
	close(fd);
	st = testutil_wait_limit(pid, "lvmm --jail", 20);
	ck_assert_msg(entries(victim) == 0, "the jail was built in %s", victim);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
	out = testutil_slurp(console);
	ck_assert_ptr_nonnull(out);
	ck_assert_msg(strstr(out, "hello from ring 3"), "console: %s", out);
	free(out);
	ck_assert_uint_eq(entries(old), 0);
}
END_TEST

/* A serial file under a symlinked directory: refused before anything is created or chowned in
 * the directory the link points to. */
START_TEST(test_precreate_symlinked_dir)
{
	char link[160], serial[200], inside[200];
	struct testutil_run r;
	char *args[] = {"run",	    "--jail", root,	   "--jail-uid",       "65534",
			"--kernel", guest,    "--cmdline", "bench.mode=hello", "--serial",
			serial,	    NULL};

	snprintf(link, sizeof(link), "%s/link", files);
	ck_assert_int_eq(symlink(victim, link), 0);
	snprintf(serial, sizeof(serial), "file=%s/console.log", link);
	snprintf(inside, sizeof(inside), "%s/console.log", victim);
	testutil_run_lvmm(&r, args, NULL, NULL, 0, 20);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1, "status %#x: %s", r.status,
		      r.err);
	ck_assert_msg(strstr(r.err, "symbolic link"), "stderr: %s", r.err);
	ck_assert_int_ne(access(inside, F_OK), 0);
}
END_TEST

/* A kernel reached through a symlinked directory is not bound in: any host file could be. */
START_TEST(test_bind_symlinked_source)
{
	char link[160], kernel[200];
	struct testutil_run r;
	char *args[] = {"run",	    "--jail", root,	   "--jail-uid",       "65534",
			"--kernel", kernel,   "--cmdline", "bench.mode=hello", "--serial",
			"off",	    NULL};

	snprintf(link, sizeof(link), "%s/klink", dir);
	ck_assert_int_eq(symlink(files, link), 0);
	snprintf(kernel, sizeof(kernel), "%s/guest.elf", link);
	testutil_run_lvmm(&r, args, NULL, NULL, 0, 20);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1, "status %#x: %s", r.status,
		      r.err);
	ck_assert_msg(strstr(r.err, "symbolic link"), "stderr: %s", r.err);
}
END_TEST

/* DIR must be root's and writable by root only, and so must every directory above it (a
 * world-writable one only with the sticky bit): whoever could rename them chose the root. */
START_TEST(test_dir_ownership)
{
	char sub[160], jail[200];
	struct testutil_run r;
	char *args[] = {"run",	    "--jail", jail,	  "--jail-uid", "65534",
			"--kernel", guest,    "--serial", "off",	NULL};

	snprintf(jail, sizeof(jail), "%s", root);
	ck_assert_int_eq(chown(root, 65534, 65534), 0);
	testutil_run_lvmm(&r, args, NULL, NULL, 0, 20);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1, "status %#x: %s", r.status,
		      r.err);
	ck_assert_msg(strstr(r.err, "must be root's"), "stderr: %s", r.err);
	ck_assert_int_eq(chown(root, 0, 0), 0);

	snprintf(sub, sizeof(sub), "%s/open", dir);
	ck_assert_int_eq(mkdir(sub, 0777), 0);
	ck_assert_int_eq(chmod(sub, 0777), 0);
	snprintf(jail, sizeof(jail), "%s/open/root", dir);
	ck_assert_int_eq(mkdir(jail, 0755), 0);
	testutil_run_lvmm(&r, args, NULL, NULL, 0, 20);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1, "status %#x: %s", r.status,
		      r.err);
	ck_assert_msg(strstr(r.err, "must be root's"), "stderr: %s", r.err);
}
END_TEST

/* An empty API VMM jailed with --allowed-dir: the directory held since start is the one bound
 * in the jail, so ".." from the VM process's fd of it stays in the jail (a host fd would reach
 * the host's /), and a VM created over the API boots from it and writes its console there. */
START_TEST(test_allowed_dir_in_jail)
{
	char allowed[160], sock[160], out[200], body[1024], up[128];
	char *create[] = {"api", "--socket", sock, "create", body, NULL};
	char *boot[] = {"api", "--socket", sock, "boot", NULL};
	char *shutdown[] = {"api", "--socket", sock, "shutdown-vmm", NULL};
	struct testutil_run r;
	struct dirent *e;
	DIR *d;
	pid_t outer, child = 0;
	int found = 0, st;
	char *s = NULL;

	snprintf(allowed, sizeof(allowed), "%s/allowed", dir);
	snprintf(sock, sizeof(sock), "%s/api.sock", dir);
	snprintf(out, sizeof(out), "%s/console.log", allowed);
	ck_assert_int_eq(mkdir(allowed, 0755), 0);
	ck_assert_int_eq(chown(allowed, 65534, 65534), 0);
	ck_assert_int_eq(testutil_system("cp %s %s/guest", guest, allowed), 0);
	outer = fork();
	ck_assert_int_ge(outer, 0);
	if (!outer) {
		char *argv[] = {
		    (char *)testutil_lvmm(), "run", "--jail",	     root,    "--jail-uid", "65534",
		    "--api-socket",	     sock,  "--allowed-dir", allowed, NULL};

		execv(argv[0], argv);
		_exit(127);
	}
	for (int i = 0; i < 200 && !child; i++) {
		char path[64], buf[64] = "";

		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)outer, (int)outer);
		if (testutil_read_file(path, buf, sizeof(buf) - 1) > 0)
			child = (pid_t)atoi(buf);
		if (!child)
			testutil_sleep_ms(25);
	}
	ck_assert_int_gt(child, 0);
	/* in its own root (no /etc there): the fd is then the jail's, not the one held before */
	snprintf(up, sizeof(up), "/proc/%d/root/etc", (int)child);
	for (int i = 0; i < 1000 && !access(up, F_OK); i++)
		testutil_sleep_ms(5);
	ck_assert_int_ne(access(up, F_OK), 0);
	for (int i = 0; i < 200 && !found; i++) {
		char link[PATH_MAX], p[128];

		snprintf(p, sizeof(p), "/proc/%d/fd", (int)child);
		d = opendir(p);
		while (d && (e = readdir(d))) {
			ssize_t n;

			snprintf(p, sizeof(p), "/proc/%d/fd/%.16s", (int)child, e->d_name);
			n = readlink(p, link, sizeof(link) - 1);
			if (n > 0 && (link[n] = 0, !strcmp(link, allowed))) {
				found = atoi(e->d_name);
				break;
			}
		}
		if (d)
			closedir(d);
		if (!found)
			testutil_sleep_ms(25);
	}
	ck_assert_msg(found, "no fd of %s in the jailed process", allowed);
	/* as many ".." as the path has components, and more: the host's / has etc */
	snprintf(up, sizeof(up), "/proc/%d/fd/%d/../../../../../etc", (int)child, found);
	ck_assert_msg(access(up, F_OK) != 0, "%s reaches the host's /", up);

	snprintf(body, sizeof(body),
		 "{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 67108864},"
		 " \"payload\": {\"kernel\": \"%s/guest\", \"cmdline\": \"bench.mode=hello\"},"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"}}",
		 allowed, out);
	testutil_run_lvmm(&r, create, NULL, NULL, 0, 10);
	ck_assert_msg(WIFEXITED(r.status) && !WEXITSTATUS(r.status), "create: %s %s", r.out, r.err);
	testutil_run_lvmm(&r, boot, NULL, NULL, 0, 10);
	ck_assert_msg(WIFEXITED(r.status) && !WEXITSTATUS(r.status), "boot: %s %s", r.out, r.err);
	for (int i = 0; i < 200; i++) {
		s = testutil_slurp(out);
		if (s && strstr(s, "hello from ring 3"))
			break;
		free(s);
		s = NULL;
		testutil_sleep_ms(25);
	}
	ck_assert_msg(s, "no console output in %s", out);
	free(s);
	testutil_run_lvmm(&r, shutdown, NULL, NULL, 0, 10);
	st = testutil_wait_limit(outer, "lvmm --jail", 20);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
}
END_TEST

/* A VM on a softssd, jailed: only its SSD's socket is bound in (another SSD's socket in the same
 * directory is not there), and the VM runs I/O through it. */
START_TEST(test_ssd_socket_only)
{
	char run[160], sdir[200], log[200], backing[200], b2[200], path[400], *s;
	const char *o1[] = {"--backing", backing, "--size", "1G", "--allow-uid", "65534", NULL};
	const char *o2[] = {"--backing", b2, "--size", "1G", NULL};
	pid_t s1, s2, outer, child = 0;
	int st;

	snprintf(run, sizeof(run), "%s/run", dir);
	snprintf(sdir, sizeof(sdir), "%s/ssd", run);
	snprintf(log, sizeof(log), "%s/ssd.log", dir);
	snprintf(backing, sizeof(backing), "%s/j1.img", dir);
	snprintf(b2, sizeof(b2), "%s/j2.img", dir);
	setenv("LVMM_RUN_DIR", run, 1);
	s1 = testutil_ssd_start("jssd1", log, o1);
	s2 = testutil_ssd_start("jssd2", log, o2);
	/* the operator's part: the jail's group may connect */
	ck_assert_int_eq(testutil_system("chgrp 65534 %s/jssd1.sock", sdir), 0);
	snprintf(path, sizeof(path), "file=%s", console);
	outer = fork();
	ck_assert_int_ge(outer, 0);
	if (!outer) {
		char *argv[] = {(char *)testutil_lvmm(),
				"run",
				"--jail",
				root,
				"--jail-uid",
				"65534",
				"--kernel",
				guest,
				"--cmdline",
				"bench.mode=lio bench.ios=100",
				"--memory",
				"64M",
				"--serial",
				path,
				"--vnvme",
				"jssd1:16M",
				NULL};

		execv(argv[0], argv);
		_exit(127);
	}
	for (int i = 0; i < 500 && !child; i++) {
		char p[64], buf[64] = "";

		snprintf(p, sizeof(p), "/proc/%d/task/%d/children", (int)outer, (int)outer);
		if (testutil_read_file(p, buf, sizeof(buf) - 1) > 0)
			child = (pid_t)atoi(buf);
		if (!child)
			testutil_sleep_ms(5);
	}
	ck_assert_int_gt(child, 0);
	{
		char a[400], b[400];
		bool seen = false;

		/* once the child is in its root (no /etc there): its own SSD's socket is, the
		 * other one is not (before pivot_root its root is still the host's) */
		char etc[64];

		snprintf(a, sizeof(a), "/proc/%d/root%s/jssd1.sock", (int)child, sdir);
		snprintf(b, sizeof(b), "/proc/%d/root%s/jssd2.sock", (int)child, sdir);
		snprintf(etc, sizeof(etc), "/proc/%d/root/etc", (int)child);
		for (int i = 0; i < 1000 && !seen && !kill(child, 0); i++) {
			if (!access(etc, F_OK)) {
				testutil_sleep_ms(2);
				continue;
			}
			seen = !access(a, F_OK);
			ck_assert_msg(access(b, F_OK) != 0, "another SSD's socket in the jail: %s",
				      b);
		}
		ck_assert_msg(seen, "never saw %s", a);
	}
	st = testutil_wait_limit(outer, "lvmm --jail", 60);
	unsetenv("LVMM_RUN_DIR");
	testutil_ssd_stop(&s2, SIGTERM);
	testutil_ssd_stop(&s1, SIGTERM);
	s = testutil_slurp(console);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, s ? s : "");
	ck_assert_msg(s && strstr(s, "bench: lio passed (0 failures)"), "console: %s", s ? s : "");
	free(s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("jail_paths");
	TCase *tc = tcase_create("jail_paths");

	if (geteuid()) {
		testutil_skip("jail_paths: not root (namespaces and mounts need it)");
		return 0;
	}
	if (!testutil_kvm_usable()) {
		testutil_skip("jail_paths: /dev/kvm not usable here");
		return 0;
	}
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_dir_swapped_after_mount);
	tcase_add_test(tc, test_precreate_symlinked_dir);
	tcase_add_test(tc, test_bind_symlinked_source);
	tcase_add_test(tc, test_dir_ownership);
	tcase_add_test(tc, test_allowed_dir_in_jail);
	tcase_add_test(tc, test_ssd_socket_only);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
