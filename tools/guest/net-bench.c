/* net-bench: the guest side of make bench's virtio-net measurements (static, for the test guest;
 * tools/bench/netbench.py is the host side and does all the timing).
 *   net-bench HOST PORT SECS
 * connects to HOST three times, one phase each:
 *   PORT     guest -> host stream: sends 64 KiB writes for SECS seconds, then closes
 *   PORT+1   host -> guest stream: reads until the host closes, then answers the byte count
 *            as 8 bytes (network order) and closes
 *   PORT+2   request/response: a 1-byte request, waits for the host's 1-byte answer, again,
 *            one outstanding, for SECS seconds, then closes
 * Prints "LVMM-NETBENCH-<PHASE> ..." lines and "LVMM-NETBENCH-DONE rc=N". */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static char buf[65536];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int dial(const char *host, unsigned port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1;
	int fd;

	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return -1;
	/* the host may still be starting its listener: a few tries */
	for (int i = 0; i < 50; i++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			return -1;
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			return fd;
		}
		close(fd);
		sleep(1);
	}
	printf("LVMM-NETBENCH-FAILED connect %s:%u: %s\n", host, port, strerror(errno));
	return -1;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int tx(const char *host, unsigned port, double secs)
{
	int fd = dial(host, port);
	unsigned long long sent = 0;
	double t0;

	if (fd < 0)
		return 1;
	memset(buf, 0x5a, sizeof(buf));
	t0 = now_s();
	while (now_s() - t0 < secs) {
		if (send_all(fd, buf, sizeof(buf))) {
			printf("LVMM-NETBENCH-FAILED tx write: %s\n", strerror(errno));
			close(fd);
			return 1;
		}
		sent += sizeof(buf);
	}
	close(fd);
	printf("LVMM-NETBENCH-TX bytes=%llu\n", sent);
	return 0;
}

static int rx(const char *host, unsigned port)
{
	int fd = dial(host, port);
	unsigned long long got = 0, be;
	ssize_t r;
	uint32_t half[2];

	if (fd < 0)
		return 1;
	while ((r = read(fd, buf, sizeof(buf))) > 0 || (r < 0 && errno == EINTR))
		if (r > 0)
			got += (unsigned long long)r;
	if (r < 0) {
		printf("LVMM-NETBENCH-FAILED rx read: %s\n", strerror(errno));
		close(fd);
		return 1;
	}
	half[0] = htonl((uint32_t)(got >> 32));
	half[1] = htonl((uint32_t)got);
	memcpy(&be, half, sizeof(be));
	r = send_all(fd, (const char *)&be, sizeof(be));
	close(fd);
	printf("LVMM-NETBENCH-RX bytes=%llu\n", got);
	return r ? 1 : 0;
}

static int rr(const char *host, unsigned port, double secs)
{
	int fd = dial(host, port);
	unsigned long long n = 0;
	double t0;
	char c = 'q';

	if (fd < 0)
		return 1;
	t0 = now_s();
	while (now_s() - t0 < secs) {
		ssize_t r;

		if (send_all(fd, &c, 1))
			break;
		while ((r = read(fd, &c, 1)) < 0 && errno == EINTR)
			;
		if (r != 1) {
			printf("LVMM-NETBENCH-FAILED rr read: %s\n", r ? strerror(errno) : "eof");
			close(fd);
			return 1;
		}
		n++;
	}
	close(fd);
	printf("LVMM-NETBENCH-RR transactions=%llu\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned port;
	double secs;
	int rc;

	if (argc != 4) {
		fprintf(stderr, "usage: net-bench HOST PORT SECS\n");
		return 2;
	}
	port = (unsigned)strtoul(argv[2], NULL, 10);
	secs = strtod(argv[3], NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN); /* a failed write says so rather than killing us */
	rc = tx(argv[1], port, secs);
	rc |= rx(argv[1], port + 1);
	rc |= rr(argv[1], port + 2, secs);
	printf("LVMM-NETBENCH-DONE rc=%d\n", rc);
	return rc;
}
