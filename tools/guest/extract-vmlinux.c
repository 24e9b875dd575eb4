/* extract-vmlinux: pulls the uncompressed vmlinux ELF out of an x86 bzImage, using the boot
 * protocol's payload_offset/payload_length and the Debian decompression tools (lz4, xz, ...). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Setup header fields (Documentation/x86/boot.rst), offsets into the bzImage file. */
#define HDR_SETUP_SECTS	   0x1f1
#define HDR_MAGIC	   0x202 /* "HdrS" */
#define HDR_VERSION	   0x206
#define HDR_PAYLOAD_OFFSET 0x248 /* from the start of the protected-mode code */
#define HDR_PAYLOAD_LENGTH 0x24c
#define HDR_MIN_VERSION	   0x208 /* first protocol version with payload fields */

extern char **environ;

struct codec {
	const char *name;
	const unsigned char magic[6];
	size_t magic_len;
	const char *const argv[5];
};

/* Every compressor Linux can build a bzImage with; the payload carries no other marker. */
static const struct codec codecs[] = {
    {"gzip", {0x1f, 0x8b}, 2, {"gzip", "-dc", NULL}},
    {"xz", {0xfd, '7', 'z', 'X', 'Z', 0x00}, 6, {"xz", "-dc", NULL}},
    {"lzma", {0x5d, 0x00, 0x00}, 3, {"xz", "--format=lzma", "-dc", NULL}},
    {"bzip2", {'B', 'Z', 'h'}, 3, {"bzip2", "-dc", NULL}},
    {"lz4", {0x02, 0x21, 0x4c, 0x18}, 4, {"lz4", "-dc", NULL}},
    {"zstd", {0x28, 0xb5, 0x2f, 0xfd}, 4, {"zstd", "-dc", NULL}},
    {"lzo", {0x89, 'L', 'Z', 'O'}, 4, {"lzop", "-dc", NULL}},
};

static uint32_t get_le32(const unsigned char *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_le64(const unsigned char *p)
{
	return get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

static int read_file(const char *path, unsigned char **buf, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t done = 0;

	if (fd < 0 || fstat(fd, &st) < 0) {
		int err = errno ? errno : EIO;

		fprintf(stderr, "extract-vmlinux: %s: %s\n", path, strerror(err));
		if (fd >= 0)
			close(fd);
		return -err;
	}
	*buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!*buf) {
		close(fd);
		fprintf(stderr, "extract-vmlinux: %s: no memory for %lld bytes\n", path,
			(long long)st.st_size);
		return -ENOMEM;
	}
	while (done < (size_t)st.st_size) {
		ssize_t n = read(fd, *buf + done, st.st_size - done);

		if (n <= 0) {
			fprintf(stderr, "extract-vmlinux: %s: short read at %zu\n", path, done);
			close(fd);
			return -EIO;
		}
		done += n;
	}
	close(fd);
	*len = done;
	return 0;
}

/* Locates the compressed payload; every field is checked against the file size. */
static int find_payload(const unsigned char *img, size_t len, const unsigned char **payload,
			size_t *plen)
{
	uint64_t setup_sects, pm_start, off, plength;
	uint16_t version;

	if (len < HDR_PAYLOAD_LENGTH + 4 || memcmp(img + HDR_MAGIC, "HdrS", 4) != 0) {
		fprintf(stderr, "extract-vmlinux: not a bzImage (no HdrS setup header)\n");
		return -EINVAL;
	}
	version = img[HDR_VERSION] | img[HDR_VERSION + 1] << 8;
	if (version < HDR_MIN_VERSION) {
		fprintf(stderr, "extract-vmlinux: boot protocol %#x has no payload fields\n",
			version);
		return -ENOTSUP;
	}
	setup_sects = img[HDR_SETUP_SECTS] ? img[HDR_SETUP_SECTS] : 4;
	pm_start = (setup_sects + 1) * 512;
	off = pm_start + get_le32(img + HDR_PAYLOAD_OFFSET);
	plength = get_le32(img + HDR_PAYLOAD_LENGTH);
	if (off > len || plength > len - off || plength < 8) {
		fprintf(stderr, "extract-vmlinux: payload %#llx+%#llx outside the %zu-byte file\n",
			(unsigned long long)off, (unsigned long long)plength, len);
		return -EINVAL;
	}
	*payload = img + off;
	*plen = plength;
	return 0;
}

static const struct codec *detect_codec(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < sizeof(codecs) / sizeof(codecs[0]); i++)
		if (len >= codecs[i].magic_len && !memcmp(p, codecs[i].magic, codecs[i].magic_len))
			return &codecs[i];
	return NULL;
}

/* Runs the decompressor with the payload on a pipe and its output into out_fd. */
static int decompress(const struct codec *c, const unsigned char *p, size_t len, int out_fd)
{
	posix_spawn_file_actions_t fa;
	int pfd[2], status, rc = 0;
	size_t done = 0;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[0], STDIN_FILENO);
	posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
	rc = posix_spawnp(&pid, c->argv[0], &fa, NULL, (char *const *)c->argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[0]);
	if (rc) {
		close(pfd[1]);
		fprintf(stderr, "extract-vmlinux: cannot run %s for a %s payload: %s\n", c->argv[0],
			c->name, strerror(rc));
		return -rc;
	}
	while (done < len) {
		ssize_t n = write(pfd[1], p + done, len - done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			break; /* the tool died; its status tells why */
		}
		done += n;
	}
	close(pfd[1]);
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || done < len) {
		fprintf(stderr, "extract-vmlinux: %s failed on the %zu-byte %s payload\n",
			c->argv[0], len, c->name);
		return -EIO;
	}
	return 0;
}

/* The payload is vmlinux (ELF64) with relocation data appended; keep only the ELF. */
static int elf_end(int fd, uint64_t *end)
{
	unsigned char eh[64], ph[56];
	struct stat st;
	uint64_t phoff, shoff, size;
	uint16_t phentsize, phnum, shentsize, shnum;

	if (fstat(fd, &st) < 0 || pread(fd, eh, sizeof(eh), 0) != (ssize_t)sizeof(eh))
		return -EIO;
	if (memcmp(eh, "\177ELF", 4) || eh[4] != 2 || eh[5] != 1) {
		fprintf(stderr,
			"extract-vmlinux: decompressed payload is not a little-endian ELF64\n");
		return -EINVAL;
	}
	size = st.st_size;
	phoff = get_le64(eh + 32);
	shoff = get_le64(eh + 40);
	phentsize = eh[54] | eh[55] << 8;
	phnum = eh[56] | eh[57] << 8;
	shentsize = eh[58] | eh[59] << 8;
	shnum = eh[60] | eh[61] << 8;
	if (phentsize != sizeof(ph) || phoff > size || (uint64_t)phnum * phentsize > size - phoff) {
		fprintf(stderr, "extract-vmlinux: bad program headers (off %#llx, %u x %u)\n",
			(unsigned long long)phoff, phnum, phentsize);
		return -EINVAL;
	}
	*end = phoff + (uint64_t)phnum * phentsize;
	if (shnum && shoff <= size && (uint64_t)shnum * shentsize <= size - shoff &&
	    shoff + (uint64_t)shnum * shentsize > *end)
		*end = shoff + (uint64_t)shnum * shentsize;
	for (unsigned i = 0; i < phnum; i++) {
		uint64_t off, filesz;

		if (pread(fd, ph, sizeof(ph), phoff + (uint64_t)i * phentsize) !=
		    (ssize_t)sizeof(ph))
			return -EIO;
		off = get_le64(ph + 8);
		filesz = get_le64(ph + 32);
		if (off > size || filesz > size - off) {
			fprintf(stderr, "extract-vmlinux: segment %u (%#llx+%#llx) past the end\n",
				i, (unsigned long long)off, (unsigned long long)filesz);
			return -EINVAL;
		}
		if (off + filesz > *end)
			*end = off + filesz;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct codec *c;
	const unsigned char *payload;
	unsigned char *img = NULL;
	size_t len = 0, plen = 0;
	uint64_t end;
	char *tmp;
	int fd, rc;

	if (argc != 3) {
		fprintf(stderr, "usage: extract-vmlinux BZIMAGE OUT_VMLINUX\n");
		return 2;
	}
	if (read_file(argv[1], &img, &len) || find_payload(img, len, &payload, &plen))
		return 1;
	c = detect_codec(payload, plen);
	if (!c) {
		fprintf(stderr,
			"extract-vmlinux: %s: unknown payload compression %02x %02x %02x %02x\n",
			argv[1], payload[0], payload[1], payload[2], payload[3]);
		return 1;
	}
	if (asprintf(&tmp, "%s.tmp", argv[2]) < 0)
		return 1;
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "extract-vmlinux: %s: %s\n", tmp, strerror(errno));
		return 1;
	}
	/* The build appends the uncompressed size as 4 bytes; tools treat it as trailing junk. */
	rc = decompress(c, payload, plen - 4, fd);
	if (!rc)
		rc = elf_end(fd, &end);
	if (!rc && ftruncate(fd, end) < 0)
		rc = -errno;
	close(fd);
	if (!rc && rename(tmp, argv[2]) < 0)
		rc = -errno;
	if (rc) {
		unlink(tmp);
		fprintf(stderr, "extract-vmlinux: %s: extraction failed (%s)\n", argv[1],
			strerror(-rc));
		return 1;
	}
	printf("extract-vmlinux: %s payload of %zu bytes -> %s (%llu bytes)\n", c->name, plen,
	       argv[2], (unsigned long long)end);
	return 0;
}
