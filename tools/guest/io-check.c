/* io-check: file and block-device checks for the Linux test guests, many in one process. On
 * kvm_pvm hosts each guest fork/exec costs about a second and each system call milliseconds, so
 * one run does what a pipeline of busybox tools did, with 1 MiB I/Os instead of 4 KiB ones.
 *
 * usage: io-check STEP... where each STEP is one of
 *   md5 TAG PATH [BYTES]  prints "TAG <md5 of the first BYTES (default: all) of PATH>"
 *   copy SRC DST          copies SRC to DST (a file, made or truncated, or a device) and
 *                         fsyncs DST
 *   md5copy TAG SRC DST   copy, and prints "TAG <md5 of the bytes read from SRC>"
 *   same TAG A B [direct] prints "TAG" when the first bytes of B (read with O_DIRECT when
 *                         "direct" is given) are those of all A, else "io-check: TAG: ..."
 *   echo TEXT             prints TEXT
 *   rm PATH               removes PATH (a missing one is fine)
 *   sync                  sync(2)
 *   drop                  sync(2), then drops the page cache (/proc/sys/vm/drop_caches)
 *   evict PATH            fsyncs PATH and drops its pages (and only its: dropping the whole
 *                         cache costs seconds here), then checks with mincore that none is left
 *   trim TAG PATH         FITRIM on PATH's file system; prints "TAG" when it worked
 *   write TAG DEV         writes 512 bytes at DEV's start and fsyncs: prints "TAG-WRITTEN" or,
 *                         when any step fails, "TAG-REFUSED"
 * With IO_CHECK_TIMES=1 in the environment each step's time follows it ("io-check: STEP 1.234 s").
 * Steps run in order; the first that fails (a system call did; a difference that same finds is
 * not a failure) prints "io-check: ..." and ends the run with status 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define IO_BYTES (1 << 20)

/* aligned for O_DIRECT */
static unsigned char buf[IO_BYTES] __attribute__((aligned(4096)));
static unsigned char buf2[IO_BYTES] __attribute__((aligned(4096)));

/* MD5 (RFC 1321): state, bytes hashed so far, a partial 64-byte block. */
struct md5 {
	uint32_t h[4];
	uint64_t len;
	unsigned char blk[64];
};

static const uint32_t md5_k[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};
static const unsigned char md5_r[16] = {7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21};

static void md5_block(struct md5 *m, const unsigned char *p)
{
	uint32_t w[16], a = m->h[0], b = m->h[1], c = m->h[2], d = m->h[3], f, t;
	unsigned i, g;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
		       (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
	for (i = 0; i < 64; i++) {
		switch (i / 16) {
		case 0:
			f = (b & c) | (~b & d);
			g = i;
			break;
		case 1:
			f = (d & b) | (~d & c);
			g = (5 * i + 1) % 16;
			break;
		case 2:
			f = b ^ c ^ d;
			g = (3 * i + 5) % 16;
			break;
		default:
			f = c ^ (b | ~d);
			g = (7 * i) % 16;
			break;
		}
		t = a + f + md5_k[i] + w[g];
		a = d;
		d = c;
		c = b;
		t = t << md5_r[i / 16 * 4 + i % 4] | t >> (32 - md5_r[i / 16 * 4 + i % 4]);
		b += t;
	}
	m->h[0] += a;
	m->h[1] += b;
	m->h[2] += c;
	m->h[3] += d;
}

static void md5_init(struct md5 *m)
{
	static const uint32_t h0[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};

	memcpy(m->h, h0, sizeof(h0));
	m->len = 0;
}

static void md5_add(struct md5 *m, const unsigned char *p, size_t n)
{
	size_t have = m->len % 64, take;

	m->len += n;
	if (have) {
		take = n < 64 - have ? n : 64 - have;
		memcpy(m->blk + have, p, take);
		p += take;
		n -= take;
		if (have + take < 64)
			return;
		md5_block(m, m->blk);
	}
	for (; n >= 64; p += 64, n -= 64)
		md5_block(m, p);
	memcpy(m->blk, p, n);
}

static void md5_hex(struct md5 *m, char out[33])
{
	unsigned char pad[72] = {0x80};
	uint64_t bits = m->len * 8;
	size_t padlen = 64 - (m->len + 8) % 64;
	unsigned i;

	for (i = 0; i < 8; i++)
		pad[padlen + i] = (unsigned char)(bits >> (8 * i));
	md5_add(m, pad, padlen + 8);
	for (i = 0; i < 16; i++)
		sprintf(out + 2 * i, "%02x", (m->h[i / 4] >> (8 * (i % 4))) & 0xff);
}

static int fail(const char *step, const char *path)
{
	printf("io-check: %s %s: %s\n", step, path, strerror(errno));
	return -1;
}

static int step_md5(const char *tag, const char *path, const char *bytes)
{
	unsigned long long left = bytes ? strtoull(bytes, NULL, 0) : ~0ULL;
	int fd = open(path, O_RDONLY);
	struct md5 m;
	char hex[33];
	ssize_t n;

	if (fd < 0)
		return fail("md5", path);
	md5_init(&m);
	while (left && (n = read(fd, buf, left < IO_BYTES ? left : IO_BYTES)) > 0) {
		md5_add(&m, buf, (size_t)n);
		left -= (unsigned long long)n;
	}
	if (left && n < 0) {
		close(fd);
		return fail("md5", path);
	}
	close(fd);
	md5_hex(&m, hex);
	printf("%s %s\n", tag, hex);
	return 0;
}

/* Writes all len bytes: 0, or -1 when a write failed. */
static int write_full(int fd, const unsigned char *p, size_t len)
{
	while (len) {
		ssize_t k = write(fd, p, len);

		if (k <= 0)
			return -1;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* SRC to DST, fsynced; with tag, also prints "TAG <md5 of the bytes read from SRC>". */
static int step_copy(const char *tag, const char *src, const char *dst)
{
	int in = open(src, O_RDONLY), out;
	struct md5 m;
	char hex[33];
	ssize_t n;

	if (in < 0)
		return fail("copy", src);
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (out < 0) {
		close(in);
		return fail("copy", dst);
	}
	md5_init(&m);
	while ((n = read(in, buf, IO_BYTES)) > 0) {
		md5_add(&m, buf, (size_t)n);
		if (write_full(out, buf, (size_t)n)) {
			n = -1;
			break;
		}
	}
	if (n < 0 || fsync(out)) {
		close(in);
		close(out);
		return fail("copy", dst);
	}
	close(in);
	if (close(out))
		return fail("copy", dst);
	if (tag) {
		md5_hex(&m, hex);
		printf("%s %s\n", tag, hex);
	}
	return 0;
}

/* Reads up to len bytes, fewer only at the end of the file. */
static ssize_t read_full(int fd, unsigned char *p, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);

		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

static int step_same(const char *tag, const char *a, const char *b, const char *mode)
{
	int fa = open(a, O_RDONLY), fb = -1, rc = 0;
	unsigned long long at = 0;
	ssize_t na, nb;

	if (fa < 0)
		return fail("same", a);
	fb = open(b, O_RDONLY | (mode ? O_DIRECT : 0));
	if (fb < 0) {
		close(fa);
		return fail("same", b);
	}
	while ((na = read_full(fa, buf, IO_BYTES)) > 0) {
		/* O_DIRECT lengths are whole sectors: A is read from B rounded up */
		nb = read_full(fb, buf2, mode ? ((size_t)na + 511) / 512 * 512 : (size_t)na);
		if (nb < 0) {
			rc = fail("same", b);
			break;
		}
		if (nb < na || memcmp(buf, buf2, (size_t)na)) {
			printf("io-check: %s: %s and %s differ in the MiB at byte %llu\n", tag, a,
			       b, at);
			break;
		}
		at += (unsigned long long)na;
	}
	if (na < 0)
		rc = fail("same", a);
	else if (!rc && na == 0)
		printf("%s\n", tag);
	close(fa);
	close(fb);
	return rc;
}

static int step_drop(void)
{
	int fd;

	sync();
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd < 0 || write(fd, "3\n", 2) != 2) {
		if (fd >= 0)
			close(fd);
		return fail("drop", "/proc/sys/vm/drop_caches");
	}
	close(fd);
	return 0;
}

static int step_evict(const char *path)
{
	int fd = open(path, O_RDONLY), rc = 0;
	unsigned char *vec = NULL;
	size_t pages, left = 0, i;
	struct stat st;
	off_t size;
	void *map;

	if (fd < 0)
		return fail("evict", path);
	/* a block device's size is not in st_size */
	size = fstat(fd, &st) ? -1 : S_ISBLK(st.st_mode) ? lseek(fd, 0, SEEK_END) : st.st_size;
	if (size < 0 || fsync(fd) || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)) {
		close(fd);
		return fail("evict", path);
	}
	if (size == 0) {
		close(fd);
		return 0;
	}
	pages = ((size_t)size + 4095) / 4096;
	map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
	vec = malloc(pages);
	if (map == MAP_FAILED || !vec || mincore(map, (size_t)size, vec)) {
		rc = fail("evict", path);
	} else {
		for (i = 0; i < pages; i++)
			left += vec[i] & 1;
		if (left) {
			printf("io-check: evict %s: %zu of %zu pages still cached\n", path, left,
			       pages);
			rc = -1;
		}
	}
	if (map != MAP_FAILED)
		munmap(map, (size_t)size);
	free(vec);
	close(fd);
	return rc;
}

static int step_trim(const char *tag, const char *path)
{
	struct fstrim_range r = {.start = 0, .len = ~0ULL, .minlen = 0};
	int fd = open(path, O_RDONLY);

	if (fd < 0 || ioctl(fd, FITRIM, &r)) {
		if (fd >= 0)
			close(fd);
		return fail("trim", path);
	}
	close(fd);
	printf("%s\n", tag);
	return 0;
}

static int step_write(const char *tag, const char *dev)
{
	int fd = open(dev, O_WRONLY);
	int ok;

	memset(buf, 'x', 512);
	ok = fd >= 0 && write(fd, buf, 512) == 512 && !fsync(fd);
	if (fd >= 0)
		close(fd);
	printf("%s-%s\n", tag, ok ? "WRITTEN" : "REFUSED");
	return 0;
}

/* The number of arguments the step at argv[0] takes (its optional last one counted when it is
 * there), -1 when it is unknown or short of arguments; left counts argv's words. */
static int step_args(char **argv, int left)
{
	static const struct {
		const char *name;
		int args;
		const char *opt; /* the optional last argument: "0-9" any number, else that word */
	} steps[] = {
	    {"md5", 2, "0-9"},	{"copy", 2, NULL}, {"md5copy", 3, NULL}, {"same", 3, "direct"},
	    {"echo", 1, NULL},	{"rm", 1, NULL},   {"sync", 0, NULL},	 {"drop", 0, NULL},
	    {"evict", 1, NULL}, {"trim", 2, NULL}, {"write", 2, NULL},
	};
	unsigned i;
	int n;

	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		if (strcmp(argv[0], steps[i].name))
			continue;
		n = steps[i].args;
		if (left <= n)
			return -1;
		if (steps[i].opt && left > n + 1 &&
		    (strcmp(steps[i].opt, "0-9") ? !strcmp(argv[n + 1], steps[i].opt)
						 : argv[n + 1][0] >= '0' && argv[n + 1][0] <= '9'))
			n++;
		return n;
	}
	return -1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	const char *times = getenv("IO_CHECK_TIMES");
	int i, n, rc;
	double t0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 1; i < argc; i += n + 1) {
		t0 = now_s();
		n = step_args(argv + i, argc - i);
		if (n < 0) {
			printf("io-check: bad step '%s' (see the usage in io-check.c)\n", argv[i]);
			return 2;
		}
		if (!strcmp(argv[i], "md5"))
			rc = step_md5(argv[i + 1], argv[i + 2], n == 3 ? argv[i + 3] : NULL);
		else if (!strcmp(argv[i], "copy"))
			rc = step_copy(NULL, argv[i + 1], argv[i + 2]);
		else if (!strcmp(argv[i], "md5copy"))
			rc = step_copy(argv[i + 1], argv[i + 2], argv[i + 3]);
		else if (!strcmp(argv[i], "same"))
			rc = step_same(argv[i + 1], argv[i + 2], argv[i + 3],
				       n == 4 ? argv[i + 4] : NULL);
		else if (!strcmp(argv[i], "echo"))
			rc = (printf("%s\n", argv[i + 1]), 0);
		else if (!strcmp(argv[i], "rm"))
			rc = unlink(argv[i + 1]) && errno != ENOENT ? fail("rm", argv[i + 1]) : 0;
		else if (!strcmp(argv[i], "sync"))
			rc = (sync(), 0);
		else if (!strcmp(argv[i], "drop"))
			rc = step_drop();
		else if (!strcmp(argv[i], "evict"))
			rc = step_evict(argv[i + 1]);
		else if (!strcmp(argv[i], "trim"))
			rc = step_trim(argv[i + 1], argv[i + 2]);
		else
			rc = step_write(argv[i + 1], argv[i + 2]);
		if (times && *times == '1')
			printf("io-check: %s %.3f s\n", argv[i], now_s() - t0);
		if (rc)
			return 1;
	}
	return 0;
}
