/* vNVMe passthrough and isolated modes end to end: a softssd on a temp sparse backing, the bench
 * guest's polled driver in lvmm against volumes on it (both doorbell kinds, SQ in RAM and in the
 * CMB), lvmm's exit and wake-up counters, a hostile guest, many VMs on one SSD, anonymous volume
 * lifecycle (also kill -9 of lvmm) and kill -9 of the daemon under a running VM. */
#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/lio_client.h"
#include "ssdutil.h"
#include "testutil.h"

#define SSD	    "vt0"
#define BACKING_MB  512
#define RUN_LIMIT_S 120 /* a safety net against a hung VM, not an assertion on speed */
#define LBA	    512

static char dir[64], backing[128], logpath[128];
static pid_t daemon_pid;
static const char *lba_size = "512"; /* of a new backing: case lba4k serves 4096 */

static void daemon_start(void)
{
	char size[16];
	const char *opts[] = {"--backing", backing, "--size", size, "--lba-size", lba_size, NULL};

	snprintf(size, sizeof(size), "%uM", BACKING_MB);
	daemon_pid = testutil_ssd_start(SSD, logpath, opts);
}

static int daemon_stop(int sig)
{
	return testutil_ssd_stop(&daemon_pid, sig);
}

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-vnvme-");
	snprintf(backing, sizeof(backing), "%s/backing.img", dir);
	snprintf(logpath, sizeof(logpath), "%s/daemon.log", dir);
	setenv("LVMM_RUN_DIR", dir, 1);
	/* an SSD nobody serves is never started: no state directory (test_autostart sets one) */
	setenv("LVMM_STATE_DIR", "/proc/lvmm-none", 1);
	setenv("LVMM_STATS", "1", 1);
	daemon_start();
}

static void setup_4k(void)
{
	lba_size = "4096";
	setup();
	lba_size = "512";
}

static void teardown(void)
{
	int st = daemon_stop(SIGTERM);

	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "softssd ended with 0x%x: %s", st,
		      testutil_slurp(logpath));
	testutil_rmtree(dir);
}

/* The bench guest's pattern: one byte per byte offset of the window, per seed. */
static uint8_t pattern(uint64_t seed, uint64_t off)
{
	uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ULL ^ off * 0xbf58476d1ce4e5b9ULL;

	return (uint8_t)(x >> 56);
}

static void vm_run(struct testutil_run *r, const char *vnvme, const char *cmdline)
{
	char *args[] = {"run",
			"--kernel",
			(char *)testutil_bench_guest(),
			"--memory",
			"64M",
			"--cmdline",
			(char *)cmdline,
			"--vnvme",
			(char *)vnvme,
			NULL};

	testutil_run_lvmm(r, args, NULL, NULL, 0, RUN_LIMIT_S);
}

/* A counter lvmm printed at exit (LVMM_STATS): the number after "key " on the line with tag. */
static unsigned long long stat_of(const char *out, const char *tag, const char *key)
{
	const char *l = strstr(out, tag), *k;

	ck_assert_msg(l, "no '%s' in: %s", tag, out);
	k = strstr(l, key);
	ck_assert_msg(k, "no '%s' after '%s' in: %s", key, tag, out);
	return strtoull(k + strlen(key), NULL, 10);
}

/* Exports volume vol and checks [lba, lba + n) holds seed's pattern. */
static void vol_check(const char *vol, uint64_t seed, uint64_t lba, uint64_t n)
{
	char file[160];
	uint8_t *buf;
	uint64_t i, bad = 0;
	int fd;

	snprintf(file, sizeof(file), "%s/%s.export", dir, vol);
	ck_assert_int_eq(
	    testutil_system("%s ssd vol export %s %s %s", testutil_lvmm(), SSD, vol, file), 0);
	buf = malloc(n * LBA);
	ck_assert_ptr_nonnull(buf);
	fd = open(file, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, n * LBA, (off_t)(lba * LBA)), (ssize_t)(n * LBA));
	close(fd);
	for (i = 0; i < n * LBA; i++)
		bad += buf[i] != pattern(seed, lba * LBA + i);
	free(buf);
	unlink(file);
	ck_assert_msg(bad == 0, "volume %s: %llu bytes of %llu differ from seed %llu", vol,
		      (unsigned long long)bad, (unsigned long long)(n * LBA),
		      (unsigned long long)seed);
}

static void assert_passed(const struct testutil_run *r, const char *what)
{
	ck_assert_msg(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0, "%s: status 0x%x: %s %s",
		      what, r->status, r->out, r->err);
	ck_assert_msg(strstr(r->out, "bench: lio passed (0 failures)"), "%s: %s %s", what, r->out,
		      r->err);
}

/* Every mode and doorbell kind: the pattern goes in and comes back, the host sees it in the
 * exported volume, and lvmm itself took no exit and no wake-up for the 2000+ data commands. */
START_TEST(test_modes)
{
	static const struct {
		const char *opts, *cmdline;
	} c[] = {
	    {"", ""},
	    {",doorbell=poll", " bench.sq=cmb"},
	    {",mode=passthrough", " bench.sq=cmb"},
	    {",mode=passthrough,doorbell=poll", ""},
	    {",doorbell=eventfd", " bench.dbbuf=on"},
	    {",mode=passthrough,doorbell=eventfd", " bench.dbbuf=on bench.sq=cmb"},
	    {"", " bench.dbbuf=on"},
	    {",mode=passthrough", " bench.dbbuf=late bench.sq=cmb"},
	    {"", " bench.dbbuf=late"},
	};
	struct testutil_run r;
	char vn[128], cl[256], vol[16], tag[64];
	unsigned i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		snprintf(vol, sizeof(vol), "m%u", i);
		snprintf(vn, sizeof(vn), "%s:16M,vol=%s%s", SSD, vol, c[i].opts);
		snprintf(cl, sizeof(cl), "bench.mode=lio bench.seed=%u bench.lba=%u%s", 10 + i,
			 8 * i, c[i].cmdline);
		vm_run(&r, vn, cl);
		assert_passed(&r, vn);
		ck_assert_msg(strstr(r.out, "bench: lio rw ok"), "%s: %s", vn, r.out);
		/* deleted and recreated, then reset and re-initialised: the pattern each time */
		ck_assert_msg(strstr(r.out, "bench: lio requeue and reset ok"), "%s: %s", vn,
			      r.out);
		ck_assert_msg(strstr(r.out, "bench: lio namespace 32768 blocks"), "%s", r.out);
		ck_assert_msg(
		    strstr(r.out, strstr(c[i].opts, "passthrough") ? "vcap mode 1" : "vcap mode 2"),
		    "%s: %s", vn, r.out);
		snprintf(tag, sizeof(tag), "vnvme nvme0: mode %s",
			 strstr(c[i].opts, "passthrough") ? "passthrough" : "isolated");
		/* the admin queue's dozen commands and the resets only: nothing per I/O */
		ck_assert_msg(stat_of(r.err, tag, "mmio exits ") < 80, "%s: %s", vn, r.err);
		ck_assert_msg(stat_of(r.err, tag, "wake-ups ") <= 16, "%s: %s", vn, r.err);
		ck_assert_msg(stat_of(r.err, "vcpu 0 exits", "mmio ") < 80, "%s: %s", vn, r.err);
		ck_assert_uint_ge(stat_of(r.err, tag, "backend cmds "), 2000 + 17 + 2 * 9);
		/* doorbell=auto: pages, then eventfd doorbells from Doorbell Buffer Config on
		 * (late: the bound pair moves, at first set-up and again after the reset) */
		if (!strstr(c[i].opts, "doorbell=")) {
			ck_assert_msg(strstr(r.err, "eventfd after Doorbell Buffer Config"),
				      "%s: %s", vn, r.err);
			if (strstr(c[i].cmdline, "late")) {
				ck_assert_msg(strstr(r.out, "bench: lio late dbbuf: 4 of 4"),
					      "%s: %s", vn, r.out);
				ck_assert_uint_eq(stat_of(r.err, tag, "db-switched "), 2);
			} else {
				ck_assert_uint_eq(stat_of(r.err, tag, "db-switched "), 0);
			}
		}
		fprintf(stderr, "%s: %.*s\n", vn,
			(int)strcspn(strstr(r.out, "bench: lio qd1"), "\r\n"),
			strstr(r.out, "bench: lio qd1"));
		vol_check(vol, 10 + i, 8 * i, 1024);
	}
}
END_TEST

static pid_t spawn(const char *out, char *const argv[]);
static int api(const char *sock, const char *cmd, char **out);
static void snapshot_refused(const char *sock, const char *want);

/* Emulate mode over an SSD volume: lvmm parses every command (two doorbell exits per I/O) and
 * carries it out on a queue pair of its own; the data is the volume's, which an isolated VM
 * then reads back. */
START_TEST(test_emulate_over_ssd)
{
	struct testutil_run r;

	vm_run(&r, SSD ":8M,vol=emu,mode=emulate", "bench.mode=lio bench.seed=31 bench.ios=300");
	assert_passed(&r, "emulate over an ssd");
	ck_assert_msg(strstr(r.out, "vcap mode 0"), "%s", r.out);
	ck_assert_uint_ge(stat_of(r.err, "mode emulate", "mmio exits "), 2 * 300);
	ck_assert_uint_ge(stat_of(r.err, "mode emulate", "reads "), 300);
	vol_check("emu", 31, 0, 1024);
	vm_run(&r, SSD ",vol=emu", "bench.mode=lio bench.seed=31 bench.op=verify bench.ios=10");
	assert_passed(&r, "isolated after emulate");
	/* its queue pair and bounce buffers live in the SSD backend: no snapshot yet */
	{
		char sock[128], outp[160], *o = NULL;
		char *argv[] = {(char *)testutil_lvmm(),
				"run",
				"--kernel",
				(char *)testutil_bench_guest(),
				"--memory",
				"32M",
				"--cmdline",
				"bench.mode=spin",
				"--vnvme",
				SSD ",vol=emu,mode=emulate",
				"--api-socket",
				sock,
				NULL};
		pid_t pid;
		unsigned i;

		snprintf(sock, sizeof(sock), "%s/api-emu.sock", dir);
		snprintf(outp, sizeof(outp), "%s/vm-emu.out", dir);
		pid = spawn(outp, argv);
		for (i = 0; i < 600 && api(sock, "info", &o); i++) { /* 30 s */
			free(o);
			o = NULL;
			testutil_sleep_ms(50);
		}
		free(o);
		snapshot_refused(sock,
				 "device nvme0 (vnvme) cannot be saved yet: emulate mode over ssd");
		kill(pid, SIGTERM);
		ck_assert_int_eq(testutil_wait_limit(pid, "lvmm", 30), 0);
	}
}
END_TEST

/* Two vCPUs, each with two of four isolated queue pairs on one volume (test_multiqueue has the
 * emulate case): a sequential write pass from both, then random reads and writes that the guest
 * checks against the pattern. */
START_TEST(test_mq_isolated)
{
	static const char *pass[] = {"bench.rw=write bench.ios=1024",
				     "bench.rw=randrw bench.ios=2000"};
	struct testutil_run r;
	char cl[256];
	unsigned i;

	for (i = 0; i < 2; i++) {
		char *args[] = {"run",
				"--kernel",
				(char *)testutil_bench_guest(),
				"--memory",
				"64M",
				"--cpus",
				"2",
				"--cmdline",
				cl,
				"--vnvme",
				SSD ":8M,vol=mq,queues=4",
				NULL};
		const char *res, *ios;

		snprintf(cl, sizeof(cl),
			 "bench.mode=work bench.cpus=2 bench.qp=4 bench.qd=4 bench.verify=on "
			 "bench.span_mb=1 bench.seed=23 %s",
			 pass[i]);
		testutil_run_lvmm(&r, args, NULL, NULL, 0, RUN_LIMIT_S);
		ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
			      "%s: status 0x%x: %s %s", pass[i], r.status, r.out, r.err);
		ck_assert_msg(strstr(r.out, "vcap mode 2") || strstr(r.out, "mode 2,"), "%s",
			      r.out);
		res = strstr(r.out, "bench: work result");
		ck_assert_msg(res && strstr(res, " errors=0 ") && strstr(res, " vcpus=2 "),
			      "%s: %s", pass[i], r.out);
		ios = strstr(res, " vcpu_ios=");
		ck_assert_msg(ios && ios[10] != '0' && strchr(ios, ',') &&
				  strchr(ios, ',')[1] != '0',
			      "%s: %s", pass[i], res);
		if (i)
			ck_assert_msg(!strstr(res, " verified=0"), "%s", res);
	}
}
END_TEST

/* Isolated mode against a hostile driver: every bad command fails or is dropped, a neighbour
 * volume keeps every byte, the daemon and a later VM carry on. */
START_TEST(test_hostile)
{
	struct testutil_run r;

	vm_run(&r, SSD ":4M,vol=canary", "bench.mode=lio bench.seed=99 bench.blocks=8192");
	assert_passed(&r, "canary");
	vm_run(&r, SSD ":4M,vol=victim", "bench.mode=hostile bench.seed=5");
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status 0x%x: %s %s",
		      r.status, r.out, r.err);
	ck_assert_msg(strstr(r.out, "bench: hostile contained"), "%s", r.out);
	ck_assert_msg(strstr(r.out, "bench: hostile passed (0 failures)"), "%s", r.out);
	ck_assert_msg(strstr(r.out, "write past the window: status 80"), "%s", r.out);
	ck_assert_msg(strstr(r.out, "above guest RAM: status 4"), "%s", r.out);
	ck_assert_uint_ge(stat_of(r.err, "queue 1:", "rejected "), 8);
	ck_assert_msg(kill(daemon_pid, 0) == 0, "softssd died: %s", testutil_slurp(logpath));
	vol_check("canary", 99, 0, 8192);
	vol_check("victim", 5, 16, 256);
	/* another VM reads the neighbour back through the same daemon */
	vm_run(&r, SSD ",vol=canary",
	       "bench.mode=lio bench.seed=99 bench.blocks=8192 bench.op=verify");
	assert_passed(&r, "canary verify");
}
END_TEST

/* Runs lvmm with argv in the background, stdout to out and stderr to out + ".err" (apart: the
 * two interleave mid-line otherwise). */
static pid_t spawn(const char *out, char *const argv[])
{
	char err[200];
	pid_t pid;

	snprintf(err, sizeof(err), "%s.err", out);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fo, 1);
		dup2(fe, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* What spawn()'s lvmm printed: stdout, then stderr. */
static char *spawned_output(const char *out)
{
	char err[200], *a, *b, *r;

	snprintf(err, sizeof(err), "%s.err", out);
	a = testutil_slurp(out);
	b = testutil_slurp(err);
	r = malloc(strlen(a) + strlen(b) + 2);
	ck_assert_ptr_nonnull(r);
	sprintf(r, "%s\n%s", a, b);
	free(a);
	free(b);
	return r;
}

/* n lvmm processes at once on one SSD, each its own volume and pattern. */
static void many(unsigned n, unsigned base)
{
	pid_t pid[10];
	char out[10][160];
	unsigned i;

	for (i = 0; i < n; i++) {
		char vn[64], cl[128];

		snprintf(out[i], sizeof(out[i]), "%s/vm%u.out", dir, base + i);
		snprintf(vn, sizeof(vn), "%s:8M,vol=p%u", SSD, base + i);
		snprintf(cl, sizeof(cl),
			 "bench.mode=lio bench.seed=%u bench.blocks=4096 bench.ios=200",
			 500 + base + i);
		{
			char *argv[] = {(char *)testutil_lvmm(),
					"run",
					"--kernel",
					(char *)testutil_bench_guest(),
					"--memory",
					"32M",
					"--cmdline",
					cl,
					"--vnvme",
					vn,
					NULL};

			pid[i] = spawn(out[i], argv);
		}
	}
	for (i = 0; i < n; i++) {
		int st = testutil_wait_limit(pid[i], "lvmm", RUN_LIMIT_S);
		char *o = spawned_output(out[i]);

		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "vm %u: 0x%x: %s", i, st, o);
		ck_assert_msg(strstr(o, "bench: lio passed (0 failures)"), "vm %u: %s", i, o);
		free(o);
	}
	for (i = 0; i < n; i++) {
		char vol[16];

		snprintf(vol, sizeof(vol), "p%u", base + i);
		vol_check(vol, 500 + base + i, 0, 4096);
	}
}

START_TEST(test_many_vms)
{
	many(2, 0);
	many(10, 2);
}
END_TEST

static bool vol_listed(const char *what)
{
	char cmd[256], *out = NULL;
	bool found;

	snprintf(cmd, sizeof(cmd), "%s ssd vol list %s", testutil_lvmm(), SSD);
	ck_assert_int_eq(testutil_sh(cmd, &out), 0);
	found = strstr(out, what) != NULL;
	free(out);
	return found;
}

/* ssd:64M: a 64 MiB anonymous volume for the VM's life, reclaimed after a clean exit and after
 * kill -9 of lvmm. */
START_TEST(test_anon_volume)
{
	struct testutil_run r;
	char *args[] = {"run",
			"--kernel",
			(char *)testutil_bench_guest(),
			"--memory",
			"32M",
			"--cmdline",
			"bench.mode=spin",
			"--vnvme",
			SSD ":64M",
			NULL};
	unsigned i;

	vm_run(&r, SSD ":64M", "bench.mode=lio bench.ios=10");
	assert_passed(&r, "anon");
	ck_assert_msg(strstr(r.out, "bench: lio namespace 131072 blocks"), "%s", r.out);
	ck_assert_msg(!vol_listed("anon"), "anonymous volume left after exit");
	/* kill -9 while it runs: the session ends with the process, and the volume with it */
	testutil_run_lvmm(&r, args, NULL, "heartbeat 2", SIGKILL, RUN_LIMIT_S);
	ck_assert_msg(WIFSIGNALED(r.status), "status 0x%x", r.status);
	for (i = 0; i < 100 && vol_listed("anon"); i++)
		testutil_sleep_ms(50);
	ck_assert_msg(!vol_listed("anon"), "anonymous volume left after kill -9 of lvmm");
}
END_TEST

/* kill -9 of the daemon under a running VM: the guest's commands fail, lvmm ends when the guest
 * powers off; the restarted daemon gives a new VM the same volume with its data. */
START_TEST(test_ssd_killed)
{
	char out[160], *o = NULL;
	pid_t pid;
	int st;
	unsigned i;

	char *argv[] = {(char *)testutil_lvmm(),
			"run",
			"--kernel",
			(char *)testutil_bench_guest(),
			"--memory",
			"32M",
			"--cmdline",
			"bench.mode=lio bench.seed=77 bench.ios=100000000",
			"--vnvme",
			SSD ":4M,vol=keep",
			NULL};

	snprintf(out, sizeof(out), "%s/vm.out", dir);
	pid = spawn(out, argv);
	for (i = 0; i < 2400; i++) { /* 60 s: a loaded host boots slowly */
		free(o);
		o = testutil_slurp(out);
		if (strstr(o, "bench: lio rw ok"))
			break;
		testutil_sleep_ms(25);
	}
	ck_assert_msg(strstr(o, "bench: lio rw ok"), "%s", o);
	free(o);
	st = daemon_stop(SIGKILL);
	ck_assert(WIFSIGNALED(st));
	st = testutil_wait_limit(pid, "lvmm after its SSD died", 60);
	o = spawned_output(out);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "lvmm 0x%x: %s", st, o);
	ck_assert_msg(strstr(o, "bench: lio FAIL qd1 read"), "%s", o);
	/* the driver's next look at CSTS finds Controller Fatal Status (RDY | CFS) */
	ck_assert_msg(strstr(o, "bench: lio csts 3"), "%s", o);
	ck_assert_msg(strstr(o, "went away: controller fatal status"), "%s", o);
	ck_assert_msg(strstr(o, "guest powered off"), "%s", o);
	free(o);
	daemon_start();
	{
		struct testutil_run r;

		vm_run(&r, SSD ",vol=keep", "bench.mode=lio bench.seed=77 bench.op=verify");
		assert_passed(&r, "after the restart");
	}
}
END_TEST

/* Refusals name the device, the SSD and the value. */
START_TEST(test_bad_config)
{
	struct testutil_run r;

	vm_run(&r, SSD ",vol=nosuch", "bench.mode=lio");
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0);
	ck_assert_msg(strstr(r.err, "nvme0") && strstr(r.err, "nosuch"), "%s", r.err);
	vm_run(&r, "nossd:1G", "bench.mode=lio");
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0);
	ck_assert_msg(strstr(r.err, "nvme0") && strstr(r.err, "nossd") &&
			  strstr(r.err, "/proc/lvmm-none"),
		      "%s", r.err);
	vm_run(&r, SSD ":1T", "bench.mode=lio");
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0);
	ck_assert_msg(strstr(r.err, "nvme0") && strstr(r.err, SSD), "%s", r.err);
}
END_TEST

static bool ssd_answers(const char *name)
{
	struct lio_client *c;
	char err[256];

	if (lio_client_connect(&c, name, "probe", NULL, err, sizeof(err)))
		return false;
	lio_client_close(c);
	return true;
}

/* Waits until the auto-started daemon NAME stops serving (its supervisor stops it after
 * SSD_AUTO_IDLE_MS with no session but its own). Each probe is a session too, one the supervisor
 * counts: probed every 50 ms on a loaded 2-core host the daemon kept serving past 30 s, so the
 * probes are a second apart, for up to a minute. */
static bool ssd_stops(const char *name)
{
	unsigned i;

	for (i = 0; i < 60 && ssd_answers(name); i++)
		testutil_sleep_ms(1000);
	return !ssd_answers(name);
}

/* An SSD nobody serves: lvmm starts a softssd on a sparse backing under LVMM_STATE_DIR, says so
 * in one line, and the daemon stops once the VM is gone. */
START_TEST(test_autostart)
{
	char state[128], img[192];
	struct testutil_run r;
	struct stat st;

	snprintf(state, sizeof(state), "%s/state", dir);
	setenv("LVMM_STATE_DIR", state, 1);
	vm_run(&r, "auto0:16M", "bench.mode=lio bench.ios=100");
	assert_passed(&r, "autostarted ssd");
	ck_assert_msg(strstr(r.err, "lvmm: started softssd auto0") && testutil_lines(r.err) > 0,
		      "%s", r.err);
	snprintf(img, sizeof(img), "%s/ssd/auto0.img", state);
	ck_assert_int_eq(stat(img, &st), 0);
	ck_assert_msg((uint64_t)st.st_blocks * 512 < (64ULL << 20), "backing not sparse: %lld",
		      (long long)st.st_blocks);
	ck_assert_msg(ssd_stops("auto0"), "the softssd lvmm started is still serving");
}
END_TEST

/* No --kernel: the guest next to the binary's share/lvmm (here the bench guest installed as
 * the default), and the product's own line `lvmm run --vnvme=NAME:10G` as typed. */
START_TEST(test_default_guest)
{
	char bin[128], share[128], exe[192], k[192], state[128], cmd[512];
	struct testutil_run r;
	char *args[] = {"run", "--vnvme=auto1:10G", NULL};
	const char *saved = getenv("LVMM");

	snprintf(bin, sizeof(bin), "%s/bin", dir);
	snprintf(share, sizeof(share), "%s/share/lvmm", dir);
	snprintf(exe, sizeof(exe), "%s/lvmm", bin);
	snprintf(k, sizeof(k), "%s/vmlinux", share);
	snprintf(state, sizeof(state), "%s/state", dir);
	ck_assert_int_eq(testutil_system("mkdir -p %s %s && cp %s %s && cp %s %s", bin, share,
					 testutil_lvmm(), exe, testutil_bench_guest(), k),
			 0);
	setenv("LVMM_STATE_DIR", state, 1);
	snprintf(cmd, sizeof(cmd), "%s", saved ? saved : "");
	setenv("LVMM", exe, 1);
	testutil_run_lvmm(&r, args, NULL, NULL, 0, RUN_LIMIT_S);
	if (cmd[0])
		setenv("LVMM", cmd, 1);
	else
		unsetenv("LVMM");
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "0x%x: %s %s", r.status,
		      r.out, r.err);
	ck_assert_msg(strstr(r.out, "bench: hello from ring 3"), "%s", r.out);
	ck_assert_msg(strstr(r.err, "started softssd auto1"), "%s", r.err);
	ck_assert_msg(strstr(r.err, "isolated volume anon"), "%s", r.err);
	ck_assert_msg(ssd_stops("auto1"), "the softssd lvmm started is still serving");
}
END_TEST

/* `lvmm api CMD...`: its exit status, stdout into *out (malloc'd). */
static int api(const char *sock, const char *cmd, char **out)
{
	char line[512];

	snprintf(line, sizeof(line), "%s api --socket %s %s 2>&1", testutil_lvmm(), sock, cmd);
	return testutil_sh(line, out);
}

/* A paused VM with a vNVMe that cannot be saved: vm.snapshot answers 400 with want (naming the
 * device and why), and writes nothing; the VM resumes. */
static void snapshot_refused(const char *sock, const char *want)
{
	char snapdir[200], cmd[300], state[260];
	char *o = NULL;

	ck_assert_int_eq(api(sock, "pause", &o), 0);
	free(o);
	snprintf(snapdir, sizeof(snapdir), "%s/snap", dir);
	ck_assert_int_eq(mkdir(snapdir, 0700), 0);
	snprintf(cmd, sizeof(cmd), "snapshot file://%s", snapdir);
	ck_assert_int_ne(api(sock, cmd, &o), 0);
	ck_assert_msg(strstr(o, "400") && strstr(o, want), "%s", o);
	free(o);
	snprintf(state, sizeof(state), "%s/state.bin", snapdir);
	ck_assert_int_ne(access(state, F_OK), 0);
	ck_assert_int_eq(rmdir(snapdir), 0);
	ck_assert_int_eq(api(sock, "resume", &o), 0);
	free(o);
}

/* The REST API of a VM with an isolated volume: vm.info shows the vnvme fields, vm.counters
 * the mode, volume and the backend's per-queue counters while the guest runs I/O, lvmm's own
 * exits staying flat; hot-add puts an isolated function on an anonymous volume on bus 0, and a
 * removal the guest cannot eject yet (paused) answers at once, the request left pending. */
START_TEST(test_api_counters)
{
	char sock[128], outp[160], *o = NULL, *c1 = NULL, *c2 = NULL;
	json_t *j, *d, *q;
	json_error_t je;
	pid_t pid;
	unsigned i;
	long long cmds1, cmds2, mmio1, mmio2;

	snprintf(sock, sizeof(sock), "%s/api.sock", dir);
	snprintf(outp, sizeof(outp), "%s/vm.out", dir);
	{
		char *argv[] = {(char *)testutil_lvmm(),
				"run",
				"--kernel",
				(char *)testutil_bench_guest(),
				"--memory",
				"32M",
				"--cmdline",
				"bench.mode=lio bench.ios=100000000",
				"--vnvme",
				SSD ":4M,vol=api0",
				"--api-socket",
				sock,
				NULL};

		pid = spawn(outp, argv);
	}
	for (i = 0; i < 2400; i++) { /* 60 s: a loaded host boots slowly */
		free(o);
		o = testutil_slurp(outp);
		if (strstr(o, "bench: lio rw ok"))
			break;
		testutil_sleep_ms(25);
	}
	ck_assert_msg(strstr(o, "bench: lio rw ok"), "%s", o);
	free(o);
	ck_assert_int_eq(api(sock, "info", &o), 0);
	ck_assert_msg(strstr(o, "\"vol\": \"api0\"") || strstr(o, "\"vol\":\"api0\""), "%s", o);
	ck_assert_msg(strstr(o, "isolated") && strstr(o, "doorbell"), "%s", o);
	free(o);
	ck_assert_int_eq(api(sock, "counters", &c1), 0);
	testutil_sleep_ms(300);
	ck_assert_int_eq(api(sock, "counters", &c2), 0);
	j = json_loads(c1, 0, &je);
	ck_assert_msg(j, "counters: %s", c1);
	d = json_object_get(j, "nvme0");
	ck_assert_str_eq(json_string_value(json_object_get(d, "mode")), "isolated");
	ck_assert_str_eq(json_string_value(json_object_get(d, "volume")), "api0");
	ck_assert_str_eq(json_string_value(json_object_get(d, "ssd")), SSD);
	q = json_array_get(json_object_get(d, "queues"), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(q, "qid")), 1);
	cmds1 = json_integer_value(json_object_get(q, "cmds"));
	mmio1 = json_integer_value(json_object_get(d, "mmio_exits"));
	json_decref(j);
	j = json_loads(c2, 0, &je);
	ck_assert_msg(j, "counters: %s", c2);
	d = json_object_get(j, "nvme0");
	cmds2 = json_integer_value(
	    json_object_get(json_array_get(json_object_get(d, "queues"), 0), "cmds"));
	mmio2 = json_integer_value(json_object_get(d, "mmio_exits"));
	json_decref(j);
	fprintf(stderr, "api: %lld -> %lld backend commands, mmio exits %lld -> %lld\n", cmds1,
		cmds2, mmio1, mmio2);
	ck_assert_msg(cmds2 > cmds1 && cmds1 > 0, "%s\n%s", c1, c2);
	ck_assert_msg(mmio2 == mmio1, "lvmm took exits while the guest ran I/O: %s\n%s", c1, c2);
	free(c1);
	free(c2);
	ck_assert_int_eq(api(sock, "add-vnvme " SSD ":4M", &o), 0);
	ck_assert_msg(strstr(o, "\"nvme1\"") && strstr(o, "\"0000:00:0"), "%s", o);
	free(o);
	ck_assert_int_eq(api(sock, "info", &o), 0);
	ck_assert_msg(strstr(o, "nvme1"), "%s", o);
	free(o);
	/* nvme0's named volume could be saved; nvme1's anonymous one goes with this lvmm */
	snapshot_refused(sock, "device nvme1 (vnvme) cannot be saved: its volume on ssd " SSD
			       " is anonymous");
	/* the bench guest has no ACPI and never ejects; while paused lvmm does not wait for it */
	ck_assert_int_eq(api(sock, "pause", &o), 0);
	free(o);
	ck_assert_int_ne(api(sock, "remove-device nvme1", &o), 0);
	ck_assert_msg(strstr(o, "500") && strstr(o, "paused"), "%s", o);
	free(o);
	kill(pid, SIGTERM);
	ck_assert_int_eq(testutil_wait_limit(pid, "lvmm", 30), 0);
}
END_TEST

/* The queue pairs the softssd serves for the session labelled label (the vNVMe's id). */
static int ssd_session_qpairs(const char *label)
{
	struct lio_session_list l = {0};
	struct lio_client *c;
	char err[256];
	unsigned i;
	int n = -1;

	ck_assert_int_eq(lio_client_connect(&c, SSD, "probe", NULL, err, sizeof(err)), 0);
	ck_assert_int_eq(lio_client_session_list(c, &l), 0);
	for (i = 0; i < l.count && i < LIO_SESSION_LIST_MAX; i++)
		if (!strcmp(l.s[i].label, label))
			n = (int)l.s[i].qpairs;
	lio_client_close(c);
	return n;
}

/* Function Level Reset in every mode: with the queue pair bound and the pattern on the volume,
 * the guest's FLR returns the function to its power-on state (the guest checks command, BAR0,
 * MSI-X), sets it up again and reads the pattern back; in isolated mode the softssd serves the
 * running VM exactly one queue pair afterwards (the one from before the FLR is gone). */
START_TEST(test_flr)
{
	static const char *const opts[] = {",mode=passthrough", ",mode=emulate",
					   ",mode=passthrough,doorbell=eventfd"};
	char sock[128], outp[160], vn[128], cl[160], vol[8], *o = NULL;
	struct testutil_run r;
	unsigned i;
	pid_t pid;

	for (i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		snprintf(vol, sizeof(vol), "f%u", i);
		snprintf(vn, sizeof(vn), "%s:8M,vol=%s%s", SSD, vol, opts[i]);
		snprintf(cl, sizeof(cl),
			 "bench.mode=lio bench.flr=on bench.ios=100 bench.seed=%u%s", 40 + i,
			 strstr(opts[i], "eventfd") ? " bench.dbbuf=on" : "");
		vm_run(&r, vn, cl);
		assert_passed(&r, vn);
		ck_assert_msg(strstr(r.out, "bench: lio flr ok"), "%s: %s", vn, r.out);
		ck_assert_msg(strstr(r.out, "bench: lio requeue and reset ok"), "%s: %s", vn,
			      r.out);
		vol_check(vol, 40 + i, 0, 1024);
	}
	snprintf(sock, sizeof(sock), "%s/flr.sock", dir);
	snprintf(outp, sizeof(outp), "%s/flr.out", dir);
	{
		char *argv[] = {(char *)testutil_lvmm(),
				"run",
				"--kernel",
				(char *)testutil_bench_guest(),
				"--memory",
				"32M",
				"--cmdline",
				"bench.mode=lio bench.flr=on bench.seed=44 bench.ios=100000000",
				"--vnvme",
				SSD ":4M,vol=f9",
				"--api-socket",
				sock,
				NULL};

		pid = spawn(outp, argv);
	}
	for (i = 0; i < 2400; i++) { /* 60 s: a loaded host boots slowly */
		free(o);
		o = testutil_slurp(outp);
		if (strstr(o, "bench: lio flr ok") || strstr(o, "FAIL"))
			break;
		testutil_sleep_ms(25);
	}
	ck_assert_msg(strstr(o, "bench: lio flr ok"), "%s", o);
	free(o);
	ck_assert_int_eq(ssd_session_qpairs("nvme0"), 1);
	kill(pid, SIGTERM);
	ck_assert_int_eq(testutil_wait_limit(pid, "lvmm", 30), 0);
	vol_check("f9", 44, 0, 1024);
}
END_TEST

/* An SSD with 4 KiB LBAs in every mode: the guest sees one 4096-byte LBA format and the
 * volume's size in 4 KiB blocks, the vendor capability's window in the SSD's units (passthrough
 * adds lba_start itself: the exported volume proves the unit), the pattern goes in and comes
 * back, and the window's end holds in 4 KiB blocks. */
START_TEST(test_lba_4k)
{
	static const struct {
		const char *opts, *cmdline;
	} c[] = {
	    {"", ""},
	    {",mode=passthrough", " bench.sq=cmb"},
	    {",mode=emulate", ""},
	    {",mode=passthrough,doorbell=eventfd", " bench.dbbuf=on"},
	};
	char vn[128], cl[256], vol[16], want[64];
	struct testutil_run r;
	unsigned i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		snprintf(vol, sizeof(vol), "k%u", i);
		snprintf(vn, sizeof(vn), "%s:16M,vol=%s%s", SSD, vol, c[i].opts);
		snprintf(cl, sizeof(cl),
			 "bench.mode=lio bench.seed=%u bench.lba=%u bench.ios=200%s", 50 + i, 3 * i,
			 c[i].cmdline);
		vm_run(&r, vn, cl);
		assert_passed(&r, vn);
		ck_assert_msg(strstr(r.out, "bench: lio namespace 4096 blocks of 4096 bytes"),
			      "%s: %s", vn, r.out);
		ck_assert_msg(strstr(r.out, "bench: lio requeue and reset ok"), "%s: %s", vn,
			      r.out);
		if (!strstr(c[i].opts, "emulate")) {
			ck_assert_msg(strstr(r.out, "lba_size 4096 "), "%s: %s", vn, r.out);
			snprintf(want, sizeof(want), "at LBA %llu,",
				 (unsigned long long)stat_of(r.out, "vcap mode", "lba_start "));
			ck_assert_msg(strstr(r.err, want), "%s: %s\n%s", vn, want, r.err);
		}
		/* the guest's 1024 blocks of 4 KiB from its LBA 3i, in 512-byte units */
		vol_check(vol, 50 + i, 8 * 3 * i, 8 * 1024);
	}
}
END_TEST

/* How many times needle occurs in hay. */
static unsigned count_of(const char *hay, const char *needle)
{
	unsigned n = 0;

	while ((hay = strstr(hay, needle))) {
		n++;
		hay += strlen(needle);
	}
	return n;
}

/* Polls file until it holds want (or a failure line), 60 s at most: the guest's own progress. */
static char *wait_for(const char *file, const char *want)
{
	char *o = NULL;
	unsigned i;

	for (i = 0; i < 2400; i++) {
		free(o);
		o = testutil_slurp(file);
		if (strstr(o, want) || strstr(o, "FAIL"))
			break;
		testutil_sleep_ms(25);
	}
	return o;
}

/* An empty VMM under seccomp: vm.create with a vnvme on an SSD nobody serves starts a softssd
 * as `lvmm run` does (one line in lvmm's log), the VM boots and runs I/O on it, a second boot
 * finds it served; after vm.delete the softssd stops by itself, and the VMM carries on. */
START_TEST(test_api_autostart)
{
	char sock[128], errp[160], console[160], cfgp[160], state[128], *o = NULL, *e;
	char *argv[] = {(char *)testutil_lvmm(), "--api-socket", sock, "--ssd-autostart", NULL};
	FILE *f;
	pid_t pid;
	unsigned i;

	snprintf(state, sizeof(state), "%s/state", dir);
	setenv("LVMM_STATE_DIR", state, 1);
	snprintf(sock, sizeof(sock), "%s/auto.sock", dir);
	snprintf(errp, sizeof(errp), "%s/auto.out", dir);
	snprintf(console, sizeof(console), "%s/auto.console", dir);
	snprintf(cfgp, sizeof(cfgp), "%s/auto.json", dir);
	f = fopen(cfgp, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f,
		"{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 33554432},"
		" \"payload\": {\"kernel\": \"%s\", \"cmdline\": \"bench.mode=lio bench.ios=100\"},"
		" \"serial\": {\"mode\": \"File\", \"file\": \"%s\"},"
		" \"vnvme\": [{\"ssd\": \"auto3\", \"size\": 16777216}]}",
		testutil_bench_guest(), console);
	fclose(f);
	ck_assert(!ssd_answers("auto3"));
	pid = spawn(errp, argv);
	for (i = 0; i < 2400 && access(sock, F_OK); i++)
		testutil_sleep_ms(25);
	ck_assert_int_eq(access(sock, F_OK), 0);
	{
		char cmd[200];

		snprintf(cmd, sizeof(cmd), "create @%s", cfgp);
		ck_assert_msg(api(sock, cmd, &o) == 0, "%s", o);
		free(o);
	}
	ck_assert(ssd_answers("auto3"));
	ck_assert_msg(api(sock, "boot", &o) == 0, "%s", o);
	free(o);
	o = wait_for(console, " failures)");
	ck_assert_msg(strstr(o, "bench: lio passed (0 failures)"), "%s", o);
	free(o);
	/* the guest powered off; boot again re-creates the VM on the SSD still served */
	for (i = 0; i < 2400; i++) {
		ck_assert_int_eq(api(sock, "info", &o), 0);
		if (strstr(o, "Shutdown"))
			break;
		free(o);
		testutil_sleep_ms(25);
	}
	ck_assert_msg(strstr(o, "Shutdown"), "%s", o);
	free(o);
	ck_assert_msg(api(sock, "boot", &o) == 0, "%s", o);
	free(o);
	ck_assert_msg(api(sock, "delete", &o) == 0, "%s", o);
	free(o);
	ck_assert_msg(ssd_stops("auto3"), "the softssd lvmm started is still serving");
	ck_assert_msg(api(sock, "ping", &o) == 0, "%s", o);
	free(o);
	ck_assert_msg(api(sock, "shutdown-vmm", &o) == 0, "%s", o);
	free(o);
	ck_assert_int_eq(testutil_wait_limit(pid, "lvmm", 30), 0);
	e = spawned_output(errp);
	ck_assert_msg(count_of(e, "lvmm: started softssd auto3") == 1, "%s", e);
	free(e);
	setenv("LVMM_STATE_DIR", "/proc/lvmm-none", 1);
}
END_TEST

/* The write-through syncs softssd logged for the VMs' sessions ('nvme0' is the label lvmm
 * gives), once n of them have ended (the daemon logs a session when it sees the hang-up). */
static unsigned long long vm_syncs(unsigned n)
{
	unsigned long long sum = 0;
	char *o = NULL;
	const char *l;
	unsigned i;

	for (i = 0; i < 800; i++) { /* 20 s at most */
		free(o);
		o = testutil_slurp(logpath);
		if (count_of(o, "'nvme0' gone:") >= n)
			break;
		testutil_sleep_ms(25);
	}
	ck_assert_msg(count_of(o, "'nvme0' gone:") == n, "%u VM sessions ended, want %u: %s",
		      count_of(o, "'nvme0' gone:"), n, o);
	for (l = strstr(o, "'nvme0' gone:"); l; l = strstr(l + 1, "'nvme0' gone:")) {
		const char *e = strchr(l, '\n'), *k = strstr(l, " rejected, ");

		ck_assert_msg(k && (!e || k < e), "no counters after rejected: %s", l);
		sum += strtoull(k + strlen(" rejected, "), NULL, 10);
	}
	free(o);
	return sum;
}

/* The guest turns its volatile write cache off (Set Features 06h) and reads it back off: in
 * isolated and passthrough mode softssd then syncs every write of the VM before its CQE (8 of
 * 64 KiB for the 1024-block pattern, more for the recreated queue pair's), which it counts; the
 * cache left on, it syncs none. The pattern is on the volume either way. */
START_TEST(test_vwc_off)
{
	struct testutil_run r;
	unsigned long long s0, s1, s2;

	vm_run(&r, SSD ":16M,vol=w0", "bench.mode=lio bench.seed=40");
	assert_passed(&r, "cache on");
	s0 = vm_syncs(1);
	ck_assert_uint_eq(s0, 0);
	vm_run(&r, SSD ":16M,vol=w1", "bench.mode=lio bench.seed=41 bench.vwc=off");
	assert_passed(&r, "isolated, cache off");
	ck_assert_msg(strstr(r.out, "bench: lio volatile write cache off"), "%s", r.out);
	s1 = vm_syncs(2);
	ck_assert_uint_ge(s1, 8);
	vm_run(&r, SSD ":16M,vol=w2,mode=passthrough",
	       "bench.mode=lio bench.seed=42 bench.vwc=off");
	assert_passed(&r, "passthrough, cache off");
	s2 = vm_syncs(3);
	ck_assert_uint_ge(s2 - s1, 8);
	vol_check("w1", 41, 0, 1024);
	vol_check("w2", 42, 0, 1024);
}
END_TEST

/* A case of one test with its fixture: CK_RUN_CASE=NAME runs it alone. */
static void add_case(Suite *s, const char *name, void (*up)(void), const TTest *test)
{
	TCase *t = tcase_create(name);

	tcase_add_checked_fixture(t, up, teardown);
	tcase_set_timeout(t, 3 * RUN_LIMIT_S);
	tcase_add_test(t, test);
	suite_add_tcase(s, t);
}

static Suite *vnvme_modes_suite(void)
{
	Suite *s = suite_create("vnvme_modes");
	TCase *t = tcase_create("softssd");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 3 * RUN_LIMIT_S);
	tcase_add_test(t, test_modes);
	tcase_add_test(t, test_emulate_over_ssd);
	tcase_add_test(t, test_hostile);
	tcase_add_test(t, test_many_vms);
	tcase_add_test(t, test_anon_volume);
	tcase_add_test(t, test_ssd_killed);
	tcase_add_test(t, test_bad_config);
	tcase_add_test(t, test_autostart);
	tcase_add_test(t, test_default_guest);
	tcase_add_test(t, test_api_counters);
	suite_add_tcase(s, t);
	/* cases of their own, so that CK_RUN_CASE=NAME runs each alone */
	add_case(s, "reset", setup, test_flr);
	add_case(s, "lba4k", setup_4k, test_lba_4k);
	add_case(s, "vwc", setup, test_vwc_off);
	add_case(s, "mq", setup, test_mq_isolated);
	add_case(s, "api_autostart", setup, test_api_autostart);
	return s;
}

int main(void)
{
	if (!testutil_kvm_usable()) {
		testutil_skip("vnvme_modes: /dev/kvm not usable here");
		return 0;
	}
	return testutil_run_suite(vnvme_modes_suite());
}
