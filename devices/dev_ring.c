/* io_uring rings of device I/O threads (dev_ring.h). */
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dev_ring.h"

int dev_ring_init(struct io_uring *ring, unsigned entries, int efd, const uint8_t *ops,
		  unsigned nops)
{
	struct io_uring_restriction res[8] = {0};
	unsigned n = 0;
	int r;

	if (nops + 1 > sizeof(res) / sizeof(res[0]))
		return -EINVAL;
	/* disabled until restricted: nothing is ever submitted on an unrestricted ring */
	r = io_uring_queue_init(entries, ring, IORING_SETUP_R_DISABLED);
	if (r)
		return r;
	if (efd >= 0 && (r = io_uring_register_eventfd(ring, efd))) {
		io_uring_queue_exit(ring);
		return r;
	}
	for (unsigned i = 0; i < nops; i++) {
		res[n].opcode = IORING_RESTRICTION_SQE_OP;
		res[n++].sqe_op = ops[i];
	}
	res[n].opcode = IORING_RESTRICTION_SQE_FLAGS_ALLOWED;
	res[n++].sqe_flags = 0;
	/* Through the system call: Debian's liburing 2.3 declares io_uring_register_restrictions
	 * and io_uring_enable_rings but its shared library does not export them. */
	if (syscall(__NR_io_uring_register, ring->ring_fd, IORING_REGISTER_RESTRICTIONS, res, n) <
		0 ||
	    syscall(__NR_io_uring_register, ring->ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0) <
		0) {
		r = -errno;
		io_uring_queue_exit(ring);
		return r;
	}
	return 0;
}
