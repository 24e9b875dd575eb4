/* System V shared memory for fio in the test guest, whose kernel has no CONFIG_SYSVIPC: shmget
 * hands out anonymous shared mappings, which threads and forked children share the same way. */
#include <errno.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/shm.h>

#define SHIM_SEGS 64

static struct {
	void *addr;
	size_t size;
} segs[SHIM_SEGS];

int shmget(key_t key, size_t size, int flags)
{
	int id;

	for (id = 0; id < SHIM_SEGS; id++) {
		if (segs[id].addr)
			continue;
		segs[id].addr =
		    mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (segs[id].addr == MAP_FAILED) {
			segs[id].addr = NULL;
			errno = ENOMEM;
			return -1;
		}
		segs[id].size = size;
		return id;
	}
	errno = ENOSPC;
	return -1;
}

void *shmat(int id, const void *addr, int flags)
{
	if (id < 0 || id >= SHIM_SEGS || !segs[id].addr) {
		errno = EINVAL;
		return (void *)-1;
	}
	return segs[id].addr;
}

int shmdt(const void *addr)
{
	return 0;
}

/* IPC_RMID and the rest: the mapping lives until the process exits, which is all fio needs. */
int shmctl(int id, int cmd, struct shmid_ds *buf)
{
	if (id < 0 || id >= SHIM_SEGS || !segs[id].addr) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}
