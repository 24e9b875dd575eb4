/* `lvmm ssd vol` from the shell: every command offline on a backing (--backing) and online
 * through `lvmm ssd serve`, each refusal with its exit status and its one-line message. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lightiov/voltable.h"
#include "client/lio_client.h"
#include "testutil.h"

#define MIB	 (1ULL << 20)
#define LIMIT_S	 60 /* safety net per command, not a speed assertion */
#define CAPACITY (64 * MIB)

static char dir[64], backing[128], rundir[128], infile[128], outfile[128];
static struct testutil_run run;

/* Runs `lvmm ssd vol ARGS...` (NULL-terminated); returns its exit status (-1: killed). */
static int vol(const char *first, ...)
{
	char *args[24] = {"ssd", "vol", (char *)first};
	va_list ap;
	int n = 3;

	va_start(ap, first);
	while (n < 23 && (args[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	args[n] = NULL;
	testutil_run_lvmm(&run, args, NULL, NULL, 0, LIMIT_S);
	return WIFEXITED(run.status) ? WEXITSTATUS(run.status) : -1;
}

/* stderr is exactly one line, msg. */
static void said(const char *msg)
{
	char want[512];

	snprintf(want, sizeof(want), "%s\n", msg);
	ck_assert_str_eq(run.err, want);
}

#define ck_vol(rc, ...)                                                                            \
	do {                                                                                       \
		int got_ = vol(__VA_ARGS__, NULL);                                                 \
		ck_assert_msg(got_ == (rc), "exit %d, not %d: %s%s", got_, (rc), run.out,          \
			      run.err);                                                            \
	} while (0)

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-ssdvol-");
	snprintf(backing, sizeof(backing), "%s/ssd0.img", dir);
	snprintf(rundir, sizeof(rundir), "%s/run", dir);
	snprintf(infile, sizeof(infile), "%s/in.img", dir);
	snprintf(outfile, sizeof(outfile), "%s/out.img", dir);
	ck_assert_int_eq(
	    testutil_system("truncate -s %llu %s", (unsigned long long)(CAPACITY + MIB), backing),
	    0);
	setenv("LVMM_RUN_DIR", rundir, 1);
}

static void teardown(void)
{
	testutil_rmtree(dir);
}

/* A file of len bytes of a pattern keyed by seed (and a zero MiB in its middle when len allows). */
static void make_file(const char *path, size_t len, unsigned seed)
{
	unsigned char *b = malloc(len);
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = (unsigned char)(seed + i * 13 + i / 512);
	if (len > 3 * MIB)
		memset(b + MIB, 0, MIB);
	testutil_write_file(path, b, len, 0644);
	free(b);
}

/* The first len bytes of a and b are equal, and b holds only zeros after them up to b_len. */
static bool same_prefix(const char *a, const char *b, size_t len, size_t b_len)
{
	return testutil_system("cmp -s -n %zu %s %s", len, a, b) == 0 &&
	       testutil_system("test $(stat -c %%s %s) = %zu", b, b_len) == 0 &&
	       testutil_system("tail -c +%zu %s | cmp -s -n %zu - /dev/zero", len + 1, b,
			       b_len - len) == 0;
}

START_TEST(usage_errors)
{
	ck_vol(0, "--help");
	ck_assert_msg(strstr(run.out, "usage: lvmm ssd vol COMMAND SSD"), "%s", run.out);
	ck_vol(0, "create", "--help");
	ck_assert_msg(strstr(run.out, "import SSD VOL FILE"), "%s", run.out);
	ck_assert_int_eq(vol(NULL), 2);
	said("lvmm: ssd vol: a command is needed: create, list, delete, resize, import or export "
	     "(lvmm ssd vol --help)");
	ck_vol(2, "frob", "ssd0");
	said("lvmm: ssd vol: unknown command 'frob' (lvmm ssd vol --help)");
	ck_vol(2, "create", "ssd0", "vm1", "--backing", backing);
	said("lvmm: ssd vol create: expected SSD VOL SIZE (lvmm ssd vol --help)");
	ck_vol(2, "list", "ssd0", "extra", "--backing", backing);
	said("lvmm: ssd vol list: expected SSD (lvmm ssd vol --help)");
	ck_vol(2, "list", "ssd0", "--bogus");
	said("lvmm: ssd vol list: unknown option '--bogus' (lvmm ssd vol --help)");
	ck_vol(2, "list", "ssd0", "--backing");
	said("lvmm: ssd vol list: --backing needs a value (lvmm ssd vol --help)");
	ck_vol(2, "create", "ssd0", "vm1", "10X", "--backing", backing);
	said("lvmm: ssd vol create: ssd0: volume vm1 size: '10X' has an unknown suffix (use K, M, "
	     "G or T)");
	ck_vol(2, "resize", "ssd0", "vm1", "-5M", "--backing", backing);
	/* Nothing was written by any of them: the backing is still blank. */
	ck_vol(0, "list", "ssd0", "--backing", backing);
	ck_assert_str_eq(run.out, "ssd0: blank backing (no volume table yet)\n");
}
END_TEST

START_TEST(offline_create_list_delete)
{
	char opt[160];

	snprintf(opt, sizeof(opt), "--backing=%s", backing);
	ck_vol(0, "create", "ssd0", "vm1", "10M", "--backing", backing);
	ck_assert_str_eq(run.out, "ssd0: volume vm1 created (10M)\n");
	ck_assert_str_eq(run.err, "");
	/* Options may come first. */
	ck_vol(0, "create", "--backing", backing, "ssd0", "vm2", "20M");
	ck_vol(0, "list", "ssd0", opt);
	ck_assert_msg(strstr(run.out, "ssd0: 2 volumes, capacity 64M, largest free extent 34M, "
				      "512-byte LBAs\n"),
		      "%s", run.out);
	ck_assert_msg(strstr(run.out, "\nvm1 "), "%s", run.out);
	ck_assert_msg(strstr(run.out, " 10M "), "%s", run.out);
	ck_assert_msg(strstr(run.out, "\nvm2 "), "%s", run.out);
	ck_assert_int_eq(testutil_lines(run.out), 4);

	ck_vol(0, "delete", "ssd0", "vm1", "--backing", backing);
	ck_assert_str_eq(run.out, "ssd0: volume vm1 deleted\n");
	ck_vol(0, "list", "ssd0", "--backing", backing);
	ck_assert_msg(!strstr(run.out, "\nvm1 "), "%s", run.out);
	ck_assert_msg(strstr(run.out, "ssd0: 1 volume, "), "%s", run.out);
}
END_TEST

START_TEST(offline_refusals)
{
	int fd;

	ck_vol(0, "create", "ssd0", "vm1", "10M", "--backing", backing);
	ck_vol(1, "create", "ssd0", "vm1", "1M", "--backing", backing);
	said("lvmm: ssd0: volume vm1 exists");
	ck_vol(1, "create", "ssd0", "vm2", "100M", "--backing", backing);
	said("lvmm: ssd0: volume vm2 size 100M exceeds free space 54M");
	ck_vol(1, "create", "ssd0", "a/b", "1M", "--backing", backing);
	said("lvmm: ssd0: invalid volume name 'a/b' (1-31 of A-Z a-z 0-9 . _ -, not . or ..)");
	ck_vol(1, "create", "ssd0", "..", "1M", "--backing", backing);
	ck_vol(1, "create", "ssd0", "0123456789012345678901234567890123", "1M", "--backing",
	       backing);
	said("lvmm: ssd0: invalid volume name '0123456789012345678901234567890...' (longer than "
	     "31 characters)");
	ck_vol(1, "create", "ssd0", "vm2", "1000", "--backing", backing);
	said("lvmm: ssd0: volume vm2 size 1000 is not a multiple of the LBA size 512");
	ck_vol(1, "create", "ssd0", "vm2", "0", "--backing", backing);
	said("lvmm: ssd0: volume vm2 size 0 (a volume needs at least one LBA)");
	ck_vol(1, "list", "ssd/0", "--backing", backing);
	said("lvmm: invalid SSD name 'ssd/0' (1-31 of A-Z a-z 0-9 . _ -)");
	ck_vol(1, "delete", "ssd0", "nope", "--backing", backing);
	said("lvmm: ssd0: no volume named nope");
	ck_vol(1, "resize", "ssd0", "nope", "20M", "--backing", backing);
	said("lvmm: ssd0: no volume named nope");
	ck_vol(1, "resize", "ssd0", "vm1", "5M", "--backing", backing);
	said("lvmm: ssd0: volume vm1 cannot shrink from 10M to 5M (grow only)");
	ck_vol(1, "resize", "ssd0", "vm1", "100M", "--backing", backing);
	said("lvmm: ssd0: volume vm1 size 100M exceeds free space 54M (it cannot grow in place)");
	ck_vol(1, "export", "ssd0", "nope", outfile, "--backing", backing);
	said("lvmm: ssd0: no volume named nope");

	/* The backing of another SSD, a missing one, one that is not a table. */
	ck_vol(1, "list", "ssd1", "--backing", backing);
	said("lvmm: ssd1: the backing holds the volume table of SSD ssd0");
	ck_vol(1, "list", "ssd0", "--backing", infile);
	ck_assert_msg(strstr(run.err, "lvmm: ssd0: backing ") &&
			  strstr(run.err, "in.img: No such file or directory\n"),
		      "%s", run.err);
	make_file(infile, 2 * MIB, 1);
	make_file(outfile, 2 * MIB, 1);
	ck_vol(1, "create", "ssd0", "x", "1M", "--backing", infile);
	said("lvmm: ssd0: the backing holds data but no volume table (not formatting it)");
	ck_assert(same_prefix(outfile, infile, 2 * MIB, 2 * MIB));

	/* Imports larger than the volume, of a file that is not there. */
	make_file(infile, 11 * MIB, 2);
	ck_vol(1, "import", "ssd0", "vm1", infile, "--backing", backing);
	ck_assert_msg(strstr(run.err, "lvmm: ssd0: import file ") &&
			  strstr(run.err, "in.img size 11M exceeds volume vm1 size 10M\n"),
		      "%s", run.err);
	ck_vol(1, "import", "ssd0", "vm1", "/nonexistent/x", "--backing", backing);
	said("lvmm: ssd0: import file /nonexistent/x: No such file or directory");

	/* A process holding the backing's lock (as a running daemon does) keeps us out. */
	fd = open(backing, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(flock(fd, LOCK_EX | LOCK_NB), 0);
	ck_vol(1, "create", "ssd0", "vm3", "1M", "--backing", backing);
	said("lvmm: ssd0: the backing is locked by another process (a running `lvmm ssd serve "
	     "ssd0`?)");
	ck_vol(1, "list", "ssd0", "--backing", backing);
	close(fd);
	ck_vol(0, "list", "ssd0", "--backing", backing);
	ck_assert_msg(strstr(run.out, "ssd0: 1 volume, "), "%s", run.out);

	/* No daemon and no --backing. */
	ck_vol(1, "list", "ssd0");
	ck_assert_msg(strstr(run.err, "lvmm: ssd0: no daemon serves it at ") &&
			  strstr(run.err, "/run/ssd/ssd0.sock (start `lvmm ssd serve ssd0`, or "
					  "pass --backing FILE to work on the backing offline)\n"),
		      "%s", run.err);
}
END_TEST

START_TEST(offline_import_resize_export)
{
	size_t len = 5 * MIB + 1000; /* not a whole number of LBAs */

	make_file(infile, len, 7);
	ck_vol(0, "create", "ssd0", "vm1", "8M", "--backing", backing);
	ck_vol(0, "create", "ssd0", "vm2", "1M", "--backing",
	       backing); /* vm1 cannot grow in place */
	ck_vol(0, "import", "ssd0", "vm1", infile, "--backing", backing);
	ck_assert_msg(strstr(run.out, "ssd0: volume vm1 imported from "), "%s", run.out);
	ck_vol(0, "resize", "ssd0", "vm1", "16M", "--backing", backing);
	ck_assert_str_eq(run.out, "ssd0: volume vm1 resized (16M)\n");
	ck_vol(0, "list", "ssd0", "--backing", backing);
	ck_assert_msg(strstr(run.out, " 16M "), "%s", run.out);
	ck_vol(0, "export", "ssd0", "vm1", outfile, "--backing", backing);
	ck_assert_msg(strstr(run.out, "ssd0: volume vm1 exported to ") &&
			  strstr(run.out, "out.img (16M)\n"),
		      "%s", run.out);
	ck_assert(same_prefix(infile, outfile, len, 16 * MIB));

	/* A second import replaces the content: the old bytes past the new file are gone. */
	make_file(infile, MIB, 9);
	ck_vol(0, "import", "ssd0", "vm1", infile, "--backing", backing);
	ck_vol(0, "export", "ssd0", "vm1", outfile, "--backing", backing);
	ck_assert(same_prefix(infile, outfile, MIB, 16 * MIB));
}
END_TEST

START_TEST(offline_corrupt_table_refused)
{
	ck_vol(0, "create", "ssd0", "vm1", "1M", "--backing", backing);
	/* Both copies damaged: refused and left as they are. */
	ck_assert_int_eq(testutil_system("printf 'XXXXXXXX' | dd of=%s bs=1 seek=16 conv=notrunc "
					 "status=none && printf 'XXXXXXXX' | dd of=%s bs=1 "
					 "seek=%u conv=notrunc status=none",
					 backing, backing, LIO_VT_COPY_OFF(1) + 16),
			 0);
	ck_vol(1, "list", "ssd0", "--backing", backing);
	said("lvmm: ssd0: the volume table is corrupt (no valid copy; not formatting it)");
	ck_vol(1, "create", "ssd0", "vm2", "1M", "--backing", backing);
	said("lvmm: ssd0: the volume table is corrupt (no valid copy; not formatting it)");
}
END_TEST

/* ---- online: through `lvmm ssd serve` ---- */

static pid_t daemon_pid;

/* Starts the daemon on the backing and waits until it answers on its socket. */
static void daemon_start(void)
{
	char *argv[] = {
	    (char *)testutil_lvmm(), "ssd", "serve", "ssd0", "--backing", backing, NULL};
	char log[160], err[256];
	struct lio_client *c = NULL;
	double t0 = testutil_now_s();
	int st;

	snprintf(log, sizeof(log), "%s/daemon.log", dir);
	daemon_pid = fork();
	ck_assert_int_ge(daemon_pid, 0);
	if (!daemon_pid) {
		int nul = open("/dev/null", O_RDONLY),
		    out = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		/* A test that fails exits without its teardown: take the daemon along. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(nul, 0);
		dup2(out, 1);
		dup2(out, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	while (lio_client_connect(&c, "ssd0", "test", NULL, err, sizeof(err))) {
		if (waitpid(daemon_pid, &st, WNOHANG) == daemon_pid) {
			char *text = testutil_slurp(log);

			daemon_pid = 0;
			ck_abort_msg("lvmm ssd serve exited (status 0x%x): %s", st, text);
		}
		ck_assert_msg(testutil_now_s() - t0 < LIMIT_S, "no daemon on the socket: %s", err);
		testutil_sleep_ms(50);
	}
	lio_client_close(c);
}

static void daemon_stop(int sig)
{
	if (daemon_pid <= 0)
		return;
	kill(daemon_pid, sig);
	testutil_wait_limit(daemon_pid, "lvmm ssd serve", LIMIT_S);
	daemon_pid = 0;
}

static void setup_online(void)
{
	setup();
	daemon_start();
}

static void teardown_online(void)
{
	daemon_stop(SIGTERM);
	teardown();
}

/* A session of the test playing a VM. */
static struct lio_client *vm_connect(void)
{
	struct lio_client *c = NULL;
	char err[256];

	ck_assert_msg(lio_client_connect(&c, "ssd0", "vm-test", NULL, err, sizeof(err)) == 0, "%s",
		      err);
	return c;
}

static void vm_attach(struct lio_client *c, const char *name, uint32_t flags,
		      struct lio_vol_attach *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), "%s", name);
	a->flags = flags;
	a->size_bytes = flags & LIO_ATTACH_ANON ? 2 * MIB : 0;
	ck_assert_msg(lio_client_vol_attach(c, a) == 0, "attach %s: %s", name, lio_client_error(c));
}

START_TEST(online_commands)
{
	size_t len = 3 * MIB + 4096;

	ck_vol(0, "create", "ssd0", "vm1", "10M");
	ck_assert_str_eq(run.out, "ssd0: volume vm1 created (10M)\n");
	ck_vol(0, "create", "ssd0", "vm2", "4M");
	ck_vol(0, "list", "ssd0");
	ck_assert_msg(strstr(run.out, "ssd0: 2 volumes, capacity 64M, largest free extent 50M"),
		      "%s", run.out);
	ck_assert_msg(strstr(run.out, "\nvm1 ") && strstr(run.out, "\nvm2 "), "%s", run.out);

	/* The daemon refuses with the same messages as the offline path. */
	ck_vol(1, "create", "ssd0", "vm1", "1M");
	said("lvmm: ssd0: volume vm1 exists");
	ck_vol(1, "create", "ssd0", "vm3", "100M");
	said("lvmm: ssd0: volume vm3 size 100M exceeds free space 50M");
	ck_vol(1, "create", "ssd0", "a:b", "1M");
	said("lvmm: ssd0: invalid volume name 'a:b' (1-31 of A-Z a-z 0-9 . _ -, not . or ..)");
	ck_vol(1, "delete", "ssd0", "nope");
	said("lvmm: ssd0: no volume named nope");
	ck_vol(1, "resize", "ssd0", "vm1", "5M");
	said("lvmm: ssd0: volume vm1 cannot shrink from 10M to 5M (grow only)");
	ck_vol(1, "export", "ssd0", "nope", outfile);
	said("lvmm: ssd0: no volume named nope");

	/* Data in through a queue pair, a resize that must move it, data out again. */
	make_file(infile, len, 5);
	ck_vol(0, "import", "ssd0", "vm1", infile);
	ck_vol(0, "resize", "ssd0", "vm1", "20M");
	ck_assert_str_eq(run.out, "ssd0: volume vm1 resized (20M)\n");
	ck_vol(0, "export", "ssd0", "vm1", outfile);
	ck_assert(same_prefix(infile, outfile, len, 20 * MIB));
	make_file(infile, 12 * MIB, 6);
	ck_vol(0, "import", "ssd0", "vm1", infile);
	ck_vol(0, "export", "ssd0", "vm1", outfile);
	ck_assert(same_prefix(infile, outfile, 12 * MIB, 20 * MIB));
	make_file(infile, 21 * MIB, 6);
	ck_vol(1, "import", "ssd0", "vm1", infile);
	ck_assert_msg(strstr(run.err, "in.img size 21M exceeds volume vm1 size 20M\n"), "%s",
		      run.err);

	ck_vol(0, "delete", "ssd0", "vm2");
	ck_vol(0, "list", "ssd0");
	ck_assert_msg(strstr(run.out, "ssd0: 1 volume, ") && !strstr(run.out, "\nvm2 "), "%s",
		      run.out);

	/* The daemon holds the backing: the offline path is refused while it runs. */
	ck_vol(1, "list", "ssd0", "--backing", backing);
	said("lvmm: ssd0: the backing is locked by another process (a running `lvmm ssd serve "
	     "ssd0`?)");

	/* The table outlives the daemon: offline after it stops, online after a restart. */
	daemon_stop(SIGTERM);
	make_file(infile, 12 * MIB, 6); /* what the last import wrote */
	ck_vol(0, "export", "ssd0", "vm1", outfile, "--backing", backing);
	ck_assert(same_prefix(infile, outfile, 12 * MIB, 20 * MIB));
	daemon_start();
	ck_vol(0, "list", "ssd0");
	ck_assert_msg(strstr(run.out, "\nvm1 ") && strstr(run.out, " 20M "), "%s", run.out);
}
END_TEST

START_TEST(online_in_use_refusals)
{
	struct lio_vol_attach a;
	struct lio_client *c;

	ck_vol(0, "create", "ssd0", "vm1", "4M");
	make_file(infile, MIB, 3);
	c = vm_connect();
	vm_attach(c, "vm1", 0, &a);
	ck_vol(0, "list", "ssd0");
	ck_assert_msg(strstr(run.out, "\nvm1 "), "%s", run.out);
	ck_assert_msg(strstr(run.out, "     1 -\n"), "users column: %s", run.out);

	ck_vol(1, "delete", "ssd0", "vm1");
	said("lvmm: ssd0: volume vm1 is in use by 1 session (delete refused)");
	ck_vol(1, "resize", "ssd0", "vm1", "8M");
	said("lvmm: ssd0: volume vm1 is in use by 1 session (resize refused)");
	ck_vol(1, "import", "ssd0", "vm1", infile);
	said("lvmm: ssd0: volume vm1 is in use by 1 session (exclusive attach refused)");
	ck_vol(1, "export", "ssd0", "vm1", outfile);
	said("lvmm: ssd0: volume vm1 is in use by 1 session (exclusive attach refused)");

	/* A read-only user is a user too. */
	lio_client_close(c);
	c = vm_connect();
	vm_attach(c, "vm1", LIO_ATTACH_READONLY, &a);
	ck_vol(1, "import", "ssd0", "vm1", infile);
	said("lvmm: ssd0: volume vm1 is in use by 1 session (exclusive attach refused)");
	ck_vol(1, "delete", "ssd0", "vm1");

	/* Once the VM is gone (its session closed), everything goes through. */
	lio_client_close(c);
	ck_vol(0, "import", "ssd0", "vm1", infile);
	ck_vol(0, "resize", "ssd0", "vm1", "8M");
	ck_vol(0, "export", "ssd0", "vm1", outfile);
	ck_assert(same_prefix(infile, outfile, MIB, 8 * MIB));
	ck_vol(0, "delete", "ssd0", "vm1");
}
END_TEST

START_TEST(online_anonymous_volumes)
{
	struct lio_vol_attach a, b;
	struct lio_client *c, *d;

	c = vm_connect();
	d = vm_connect();
	vm_attach(c, "", LIO_ATTACH_ANON, &a);
	vm_attach(d, "", LIO_ATTACH_ANON, &b);
	ck_assert_msg(!strncmp(a.name, "anon-", 5), "%s", a.name);
	ck_vol(0, "list", "ssd0");
	ck_assert_msg(strstr(run.out, a.name) && strstr(run.out, b.name), "%s", run.out);
	ck_assert_msg(strstr(run.out, " anon\n"), "%s", run.out);
	ck_vol(1, "delete", "ssd0", a.name);
	ck_assert_msg(strstr(run.err, " is in use by 1 session (delete refused)"), "%s", run.err);

	/* Its VM ends: the volume goes with it. */
	lio_client_close(c);
	ck_vol(0, "list", "ssd0");
	ck_assert_msg(!strstr(run.out, a.name) && strstr(run.out, b.name), "%s", run.out);

	/* The daemon dies with d's session open: the next daemon frees d's volume. */
	daemon_stop(SIGKILL);
	lio_client_close(d);
	ck_vol(1, "list", "ssd0"); /* its socket file is left behind, nobody answers */
	ck_assert_msg(strstr(run.err, "lvmm: ssd0: no daemon serves it at "), "%s", run.err);
	ck_vol(0, "list", "ssd0", "--backing", backing);
	ck_assert_msg(strstr(run.out, b.name), "%s", run.out);
	daemon_start();
	ck_vol(0, "list", "ssd0");
	ck_assert_msg(!strstr(run.out, b.name) && strstr(run.out, "ssd0: 0 volumes, "), "%s",
		      run.out);
}
END_TEST

static Suite *ssd_vol_suite(void)
{
	Suite *s = suite_create("ssd_vol");
	TCase *tc = tcase_create("offline");

	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, usage_errors);
	tcase_add_test(tc, offline_create_list_delete);
	tcase_add_test(tc, offline_refusals);
	tcase_add_test(tc, offline_import_resize_export);
	tcase_add_test(tc, offline_corrupt_table_refused);
	suite_add_tcase(s, tc);
	tc = tcase_create("online");
	tcase_set_timeout(tc, 240);
	tcase_add_checked_fixture(tc, setup_online, teardown_online);
	tcase_add_test(tc, online_commands);
	tcase_add_test(tc, online_in_use_refusals);
	tcase_add_test(tc, online_anonymous_volumes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(ssd_vol_suite());
}
