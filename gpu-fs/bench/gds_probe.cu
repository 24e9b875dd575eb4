// Probes cuFile on this machine: driver properties, then cuFileHandleRegister and cuFileRead on
// files of each candidate file system, with and without O_DIRECT. Explains the gds backend's state.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <cufile.h>

static void try_file(const char *path, int direct)
{
	CUfileDescr_t d;
	CUfileHandle_t h;
	CUfileError_t e;
	void *gpu;
	ssize_t n;
	int fd = open(path, O_RDWR | (direct ? O_DIRECT : 0));

	if (fd < 0) {
		printf("gds-probe,%s,%s,open,%d,%s\n", path, direct ? "direct" : "buffered", errno,
		       strerror(errno));
		return;
	}
	memset(&d, 0, sizeof(d));
	d.handle.fd = fd;
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	e = cuFileHandleRegister(&h, &d);
	if (e.err != CU_FILE_SUCCESS) {
		printf("gds-probe,%s,%s,register,%d,%s\n", path, direct ? "direct" : "buffered",
		       (int)e.err, CUFILE_ERRSTR(e.err));
		close(fd);
		return;
	}
	cudaMalloc(&gpu, 1 << 20);
	n = cuFileRead(h, gpu, 1 << 20, 0, 0);
	printf("gds-probe,%s,%s,read,%zd,%s\n", path, direct ? "direct" : "buffered", n,
	       n == (1 << 20) ? "ok" : "short");
	cuFileHandleDeregister(h);
	cudaFree(gpu);
	close(fd);
}

int main(int argc, char **argv)
{
	CUfileDrvProps_t p;
	CUfileError_t e;

	cudaFree(0);
	e = cuFileDriverOpen();
	printf("gds-probe,driver,open,%d,%s\n", (int)e.err, CUFILE_ERRSTR(e.err));
	memset(&p, 0, sizeof(p));
	e = cuFileDriverGetProperties(&p);
	printf("gds-probe,driver,props,%d,nvfs %u.%u fflags %#x dflags %#x poll_thresh %u\n",
	       (int)e.err, p.nvfs.major_version, p.nvfs.minor_version, p.fflags,
	       p.nvfs.dcontrolflags, (unsigned)p.nvfs.poll_thresh_size);
	for (int i = 1; i < argc; i++) {
		try_file(argv[i], 1);
		try_file(argv[i], 0);
	}
	cuFileDriverClose();
	return 0;
}
