/* vsock-test: the guest side of the vsock tests (static, busybox has no AF_VSOCK tool).
 *   vsock-test echo PORT N      accept N stream connections on PORT, one at a time, and echo
 *                               every byte back until the peer closes (or resets) its end
 *   vsock-test send PORT BYTES  connect to the host (CID 2) at PORT, send BYTES of a pattern
 *                               while reading the echo, and check every byte that comes back
 * Each prints one line, "LVMM-VSOCK-<WHAT> ..." the test looks for, and exits 0 on success. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/vm_sockets.h>

static uint8_t pattern(uint64_t i)
{
	return (uint8_t)(i * 131 + (i >> 11));
}

static int echo(unsigned port, unsigned n)
{
	struct sockaddr_vm sa = {
	    .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = port};
	int lfd = socket(AF_VSOCK, SOCK_STREAM, 0);
	static char buf[65536];
	unsigned long long total = 0;

	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 16)) {
		printf("LVMM-VSOCK-ECHO-FAILED listen %u: %s\n", port, strerror(errno));
		return 1;
	}
	printf("LVMM-VSOCK-LISTENING port=%u\n", port);
	fflush(stdout);
	for (unsigned i = 0; i < n; i++) {
		int fd = accept(lfd, NULL, NULL);
		unsigned long long got = 0;
		ssize_t r;

		if (fd < 0) {
			printf("LVMM-VSOCK-ECHO-FAILED accept: %s\n", strerror(errno));
			return 1;
		}
		while ((r = read(fd, buf, sizeof(buf))) > 0) {
			for (ssize_t off = 0; off < r;) {
				ssize_t w = write(fd, buf + off, (size_t)(r - off));

				if (w <= 0) {
					r = -1;
					break;
				}
				off += w;
			}
			if (r < 0)
				break;
			got += (unsigned long long)r;
		}
		/* a peer that vanished mid-stream ends only its own connection */
		printf("LVMM-VSOCK-ECHOED conn=%u bytes=%llu%s\n", i, got, r < 0 ? " (reset)" : "");
		fflush(stdout);
		total += got;
		close(fd);
	}
	printf("LVMM-VSOCK-ECHO-DONE conns=%u bytes=%llu\n", n, total);
	close(lfd);
	return 0;
}

static int send_check(unsigned port, unsigned long long bytes)
{
	struct sockaddr_vm sa = {
	    .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST, .svm_port = port};
	int fd = socket(AF_VSOCK, SOCK_STREAM, 0);
	unsigned long long sent = 0, got = 0, bad = 0;
	static uint8_t out[16384], in[65536];

	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		printf("LVMM-VSOCK-SEND-FAILED connect 2:%u: %s\n", port, strerror(errno));
		return 1;
	}
	while (got < bytes) {
		struct pollfd p = {.fd = fd, .events = POLLIN | (sent < bytes ? POLLOUT : 0)};

		if (poll(&p, 1, 30000) <= 0) {
			printf("LVMM-VSOCK-SEND-FAILED stalled at sent=%llu got=%llu\n", sent, got);
			return 1;
		}
		if ((p.revents & POLLOUT) && sent < bytes) {
			size_t n =
			    bytes - sent < sizeof(out) ? (size_t)(bytes - sent) : sizeof(out);
			ssize_t w;

			for (size_t i = 0; i < n; i++)
				out[i] = pattern(sent + i);
			w = write(fd, out, n);
			if (w < 0 && errno != EAGAIN) {
				printf("LVMM-VSOCK-SEND-FAILED write: %s\n", strerror(errno));
				return 1;
			}
			if (w > 0)
				sent += (unsigned long long)w;
		}
		if (p.revents & (POLLIN | POLLHUP)) {
			ssize_t r = read(fd, in, sizeof(in));

			if (r <= 0) {
				printf("LVMM-VSOCK-SEND-FAILED read at %llu: %s\n", got,
				       r ? strerror(errno) : "end of stream");
				return 1;
			}
			for (ssize_t i = 0; i < r; i++)
				bad += in[i] != pattern(got + (unsigned long long)i);
			got += (unsigned long long)r;
		}
	}
	close(fd);
	printf("LVMM-VSOCK-SEND-%s bytes=%llu bad=%llu\n", bad ? "FAILED" : "OK", got, bad);
	return bad != 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "echo"))
		return echo((unsigned)strtoul(argv[2], NULL, 10),
			    (unsigned)strtoul(argv[3], NULL, 10));
	if (argc == 4 && !strcmp(argv[1], "send"))
		return send_check((unsigned)strtoul(argv[2], NULL, 10),
				  strtoull(argv[3], NULL, 10));
	fprintf(stderr, "usage: vsock-test echo PORT N | send PORT BYTES\n");
	return 2;
}
