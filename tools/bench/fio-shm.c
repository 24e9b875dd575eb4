/* SysV shared memory for fio inside the Linux test guest, whose kernel has no CONFIG_SYSVIPC:
 * preloaded into fio (LD_PRELOAD), shmget/shmat/shmdt/shmctl become anonymous shared mappings. */
#include <errno.h>
#include <stddef.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>

#define FIO_SHM_MAX 64 /* fio keeps one segment per run (its thread area): a few at most */

static struct {
	size_t size;
	void *addr;
	int used;
} segs[FIO_SHM_MAX];

int shmget(key_t key, size_t size, int flags)
{
	int i;

	(void)key;
	(void)flags;
	if (!size) {
		errno = EINVAL;
		return -1;
	}
	for (i = 0; i < FIO_SHM_MAX; i++) {
		if (!segs[i].used) {
			/* mapped now, so that a child forked before shmat shares it too */
			segs[i].addr = mmap(NULL, size, PROT_READ | PROT_WRITE,
					    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
			if (segs[i].addr == MAP_FAILED) {
				errno = ENOMEM;
				return -1;
			}
			segs[i].size = size;
			segs[i].used = 1;
			return i;
		}
	}
	errno = ENOSPC;
	return -1;
}

void *shmat(int id, const void *addr, int flags)
{
	(void)addr;
	(void)flags;
	if (id < 0 || id >= FIO_SHM_MAX || !segs[id].used) {
		errno = EINVAL;
		return (void *)-1;
	}
	return segs[id].addr;
}

int shmdt(const void *addr)
{
	(void)addr; /* the mapping stays until the segment is removed and the process ends */
	return 0;
}

int shmctl(int id, int cmd, struct shmid_ds *buf)
{
	if (id < 0 || id >= FIO_SHM_MAX || !segs[id].used) {
		errno = EINVAL;
		return -1;
	}
	if (cmd == IPC_STAT && buf) {
		buf->shm_segsz = segs[id].size;
		buf->shm_nattch = 1;
	}
	return 0;
}
