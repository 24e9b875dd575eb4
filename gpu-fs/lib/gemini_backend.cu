// libgemini's backends, host side: start and stop (controller threads, cuFile, the lio
// session), and per open file what the namespace is (memory copy, raw disk or the file's
// extents, posix proxy, cuFile handle).
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>
#ifdef GEMINI_HAVE_CUFILE
#include <cufile.h>
#endif

#include "gemini_ctrl.h"

const char *gemini_backend_desc(const struct gemini_ctx *c)
{
	return c->ns_desc;
}

unsigned gemini_dev_driver(const struct gemini_ctx *c)
{
	return c->cfg.backend == GEMINI_BACKEND_LIO ? GEMINI_BK_LIO : GEMINI_BK_HOST;
}

/* The whole disk holding the file system of the file (the map's offsets are disk relative). */
static int gm_open_raw(const struct gvdk_header *h, char *why, size_t n)
{
	char path[160], line[128], name[64] = "";
	FILE *f;
	int fd;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/%suevent", h->dev_major, h->dev_minor,
		 h->part_start ? "../" : "");
	f = fopen(path, "r");
	if (!f) {
		snprintf(why, n, "%s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "DEVNAME=", 8))
			snprintf(name, sizeof(name), "/dev/%.*s", (int)strcspn(line + 8, "\n"),
				 line + 8);
	fclose(f);
	fd = open(name, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		snprintf(why, n, "%s: %s", name, strerror(errno));
	else
		snprintf(why, n, "%s", name);
	return fd;
}

int gm_backend_start(struct gemini_ctx *c)
{
	c->rawfd = -1;
	if (c->cfg.backend == GEMINI_BACKEND_LIO)
		return gm_lio_start(c); /* softssd serves the queues: no controller thread */
	c->qhead = (uint32_t *)calloc(c->cfg.nqueues, sizeof(uint32_t));
	if (!c->qhead)
		return gm_err(c, -ENOMEM, "gemini: out of memory for queue heads");
#ifdef GEMINI_HAVE_CUFILE
	if (c->cfg.backend == GEMINI_BACKEND_GDS) {
		CUfileError_t e = cuFileDriverOpen();

		if (e.err != CU_FILE_SUCCESS)
			return gm_err(c, -EIO, "gemini: cuFileDriverOpen failed: error %d (%s)",
				      (int)e.err, CUFILE_ERRSTR(e.err));
		c->gds_open = 1;
	}
#else
	if (c->cfg.backend == GEMINI_BACKEND_GDS)
		return gm_err(c, -ENOTSUP, "gemini: gds backend not built (no cufile.h here)");
#endif
	c->stop = 0;
	c->nthreads = (int)c->cfg.host_threads;
	for (int i = 0; i < c->nthreads; i++) {
		struct gm_worker *w = (struct gm_worker *)calloc(1, sizeof(*w));

		if (!w)
			return gm_err(c, -ENOMEM, "gemini: out of memory for controller %d", i);
		w->c = c;
		w->id = i;
		if (cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking) != cudaSuccess ||
		    cudaHostAlloc((void **)&w->bounce, GM_BOUNCE, cudaHostAllocDefault) !=
			cudaSuccess)
			return gm_err(c, -ENOMEM, "gemini: controller %d: no stream or bounce", i);
#ifdef GEMINI_HAVE_URING
		w->ring_ok = io_uring_queue_init(256, &w->ring, 0) == 0;
#endif
		c->workers[i] = w;
		gm_phase(w, GM_PH_POLL);
		if (pthread_create(&c->threads[i], NULL, gm_ctrl_thread, w))
			return gm_err(c, -EAGAIN, "gemini: cannot start controller thread %d", i);
	}
	{
		const char *e = getenv("GEMINI_WATCHDOG");
		char *end = (char *)"";
		unsigned long v = e ? strtoul(e, &end, 10) : 0;

		if (e && (*end || v > 3600))
			fprintf(stderr, "gemini: GEMINI_WATCHDOG=%s is not 0..3600 seconds\n", e);
		c->watchdog_s = (unsigned)v;
		if (v && v <= 3600 && !*end)
			c->watchdog_on = !pthread_create(&c->watchdog, NULL, gm_watchdog, c);
	}
	return 0;
}

void gm_backend_stop(struct gemini_ctx *c)
{
	c->stop = 1;
	if (c->cfg.backend == GEMINI_BACKEND_LIO)
		gm_lio_stop(c);
	if (c->watchdog_on)
		pthread_join(c->watchdog, NULL);
	c->watchdog_on = 0;
	for (int i = 0; i < c->nthreads; i++) {
		struct gm_worker *w = (struct gm_worker *)c->workers[i];

		pthread_join(c->threads[i], NULL);
		cudaStreamDestroy(w->stream);
		cudaFreeHost(w->bounce);
#ifdef GEMINI_HAVE_URING
		if (w->ring_ok)
			io_uring_queue_exit(&w->ring);
#endif
		free(w);
		c->workers[i] = NULL;
	}
	c->nthreads = 0;
	if (c->rawfd >= 0)
		close(c->rawfd);
#ifdef GEMINI_HAVE_CUFILE
	if (c->gds_open)
		cuFileDriverClose();
#endif
	free(c->qhead);
}

int gm_backend_open(struct gemini_ctx *c, int fd)
{
	struct gm_hfile *hf = &c->files[fd];
	char why[256] = "";

	switch (c->cfg.backend) {
	case GEMINI_BACKEND_LIO:
		return gm_lio_open(c, fd);
	case GEMINI_BACKEND_NVME:
		if (c->cfg.memory_namespace) {
			/* mapped: the GPU reaches the image directly too (the mapped path) */
			if (cudaHostAlloc((void **)&hf->mem, hf->hdr.file_size,
					  cudaHostAllocMapped | cudaHostAllocPortable) !=
			    cudaSuccess)
				return gm_err(c, -ENOMEM,
					      "gemini_open %s: no %llu bytes of pinned memory "
					      "for the memory namespace",
					      hf->path, (unsigned long long)hf->hdr.file_size);
			if (cudaHostGetDevicePointer((void **)&hf->mem_dev, hf->mem, 0) !=
			    cudaSuccess) {
				hf->mem_dev = NULL; /* no mapped path: the cached one serves */
				cudaGetLastError(); /* not left for a later check to find */
			}
			if (gm_rw_all(hf->sysfd, hf->mem, hf->hdr.file_size, 0, false)) {
				cudaFreeHost(hf->mem);
				hf->mem = NULL;
				hf->mem_dev = NULL;
				return gm_err(c, -EIO,
					      "gemini_open %s: loading the memory namespace "
					      "failed",
					      hf->path);
			}
			snprintf(c->ns_desc, sizeof(c->ns_desc),
				 "nvme: software controller, namespace in host memory");
			return 0;
		}
		if (c->rawfd < 0)
			c->rawfd = gm_open_raw(&hf->hdr, why, sizeof(why));
		if (c->rawfd >= 0)
			snprintf(c->ns_desc, sizeof(c->ns_desc),
				 "nvme: software controller, namespace = raw disk %s (O_DIRECT)",
				 why);
		else
			snprintf(c->ns_desc, sizeof(c->ns_desc),
				 "nvme: software controller, namespace = the file's extents%s "
				 "(raw disk unavailable: %s)",
				 c->cfg.direct ? " (O_DIRECT)" : "", why);
		return 0;
	case GEMINI_BACKEND_POSIX:
		snprintf(c->ns_desc, sizeof(c->ns_desc), "posix proxy: pread/pwrite%s + cudaMemcpy",
			 c->cfg.direct ? " (O_DIRECT)" : "");
		return 0;
	case GEMINI_BACKEND_GDS:
#ifdef GEMINI_HAVE_CUFILE
	{
		CUfileDescr_t d;
		CUfileHandle_t h;
		CUfileError_t e;

		memset(&d, 0, sizeof(d));
		d.handle.fd = hf->sysfd;
		d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
		e = cuFileHandleRegister(&h, &d);
		if (e.err != CU_FILE_SUCCESS)
			return gm_err(c, -EIO,
				      "gemini_open %s: cuFileHandleRegister failed: error %d "
				      "(%s)%s",
				      hf->path, (int)e.err, CUFILE_ERRSTR(e.err),
				      c->cfg.direct ? "" : "; gds needs O_DIRECT (config.direct)");
		hf->cufile = h;
		snprintf(c->ns_desc, sizeof(c->ns_desc), "gds proxy: cuFileRead/cuFileWrite");
		return 0;
	}
#else
		return gm_err(c, -ENOTSUP, "gemini_open: gds backend not built");
#endif
	}
	return gm_err(c, -EINVAL, "gemini_open: backend %d unknown", (int)c->cfg.backend);
}

void gm_backend_close(struct gemini_ctx *c, int fd)
{
	struct gm_hfile *hf = &c->files[fd];

	if (c->cfg.backend == GEMINI_BACKEND_LIO)
		gm_lio_close(c, fd);
	if (hf->mem) {
		/* the memory namespace is volatile: closing a writable file stores it back */
		if (hf->writable && !c->stop)
			gm_rw_all(hf->sysfd, hf->mem + hf->hdr.data_offset, hf->hdr.data_size,
				  hf->hdr.data_offset, true);
		cudaFreeHost(hf->mem);
		hf->mem = NULL;
		hf->mem_dev = NULL;
	}
#ifdef GEMINI_HAVE_CUFILE
	if (hf->cufile) {
		cuFileHandleDeregister((CUfileHandle_t)hf->cufile);
		hf->cufile = NULL;
	}
#endif
}
