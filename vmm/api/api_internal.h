/* Internals of the REST API shared by its files and tests: the VMM state the router acts on,
 * the HTTP request/response framing, the JSON <-> vm_config mapping and the server loop. */
#ifndef LVMM_API_INTERNAL_H
#define LVMM_API_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>
#include <jansson.h>

#include "config.h"
#include "fsutil.h"
#include "vm.h"

#define API_VERSION	     "0.1.0"
#define API_PREFIX	     "/api/v1/"
#define API_MAX_URL	     1024
#define API_MAX_HEADERS	     (8 * 1024) /* request line + headers, bytes */
#define API_MAX_BODY	     (64 * 1024)
#define API_MAX_CONNS	     64
#define API_IDLE_TIMEOUT_MS  10000 /* a client silent this long mid-request or idle is dropped */
#define API_ERR_LEN	     256
#define API_MAX_PCI_SEGMENTS 96 /* cloud-hypervisor's platform.num_pci_segments bound */

/* The VM operations the router calls. Production uses api_vm_ops_kvm (vm.h); tests and the
 * fuzz target plug in a fake so the router runs without KVM. */
struct api_vm_ops {
	int (*create)(const struct vm_config *cfg, struct vm **out, char *err, unsigned errlen);
	int (*boot)(struct vm *vm, char *err, unsigned errlen);
	int (*pause)(struct vm *vm, char *err, unsigned errlen);
	int (*resume)(struct vm *vm, char *err, unsigned errlen);
	int (*shutdown)(struct vm *vm, char *err, unsigned errlen);
	int (*reboot)(struct vm *vm, char *err, unsigned errlen);
	void (*destroy)(struct vm *vm);
	/* Blocks until the VM stops; NULL when the VM reports its state by itself (fakes). */
	enum vm_exit_reason (*wait)(struct vm *vm);
	enum vm_state (*get_state)(const struct vm *vm);
	const struct vm_config *(*get_config)(const struct vm *vm);
	uint64_t (*memory_actual)(const struct vm *vm);
	unsigned (*get_counters)(struct vm *vm, struct dev_counters *out, unsigned max);
	/* Console byte counters (may be NULL: vm.counters then has no "console"). */
	void (*console_stats)(struct vm *vm, struct serial_stats *st);
	int (*add_vnvme)(struct vm *vm, struct vnvme_config *c, char *err, unsigned errlen);
	/* add_vnvme, add_disk, add_fs, add_net: c->id, when empty, becomes the id chosen */
	int (*add_disk)(struct vm *vm, struct virtio_blk_config *c, char *err,
			unsigned errlen); /* may be NULL: vm.add-disk is then refused */
	int (*add_fs)(struct vm *vm, struct virtio_fs_config *c, char *err,
		      unsigned errlen); /* may be NULL likewise */
	int (*add_vsock)(struct vm *vm, const struct virtio_vsock_config *c, char *err,
			 unsigned errlen); /* may be NULL likewise */
	int (*add_net)(struct vm *vm, struct virtio_net_config *c, char *err,
		       unsigned errlen); /* may be NULL likewise */
	int (*add_device)(struct vm *vm, struct vfio_pci_config *c, char *err,
			  unsigned errlen); /* may be NULL likewise */
	int (*remove_device)(struct vm *vm, const char *id, char *err, unsigned errlen);
	/* PCI slot (device number on bus 0) of a device by id: 0, or -ENOENT; may be NULL. */
	int (*device_slot)(struct vm *vm, const char *id, unsigned *slot);
	/* Snapshots (vm.h); either NULL: vm.snapshot / vm.restore answer 501. */
	int (*snapshot)(struct vm *vm, int dirfd, const char *dir, const void *config,
			size_t config_len, struct vm_snapshot_stats *stats, char *err,
			unsigned errlen);
	int (*restore)(const struct vm_config *cfg, int dirfd, const void *config,
		       size_t config_len, struct vm **out, char *err, unsigned errlen);
	/* Live migration (vm.h); either NULL: vm.send-migration / vm.receive-migration answer
	 * 501. */
	int (*migrate_send)(struct vm *vm, const char *path, bool local, const void *config,
			    size_t config_len, struct vm_migrate_stats *st, char *err,
			    unsigned errlen);
	int (*migrate_receive)(const char *path, vm_migrate_config_fn parse, void *ctx,
			       struct vm **out, struct vm_migrate_stats *st, char *err,
			       unsigned errlen);
	/* Config defaults and checks (config.h); NULL validate skips the check. */
	void (*defaults)(struct vm_config *c);
	int (*validate)(const struct vm_config *c, char *err, unsigned errlen);
	/* Checks a file a client named (fsutil.h: fsutil_check); NULL skips file checks. */
	int (*check_path)(const char *root, const char *what, const char *path, bool may_create,
			  enum fsutil_kind kind, char *err, unsigned errlen);
};

extern const struct api_vm_ops api_vm_ops_kvm;

/* What the router acts on. Only the server thread touches it, except the waiter thread which
 * writes wait_reason before signalling stop_efd. */
struct api_vmm {
	const struct api_vm_ops *ops;
	struct vm *vm;
	bool vm_owned;	  /* created by vm.create: the API destroys it; else the caller does */
	bool vm_external; /* started from the command line: lvmm exits when it stops */
	bool shutdown;	  /* vmm.shutdown answered: the server stops once replies are sent */
	/* A booted VM has a waiter thread in ops->wait(): it collects the vCPU threads when the
	 * guest stops on its own, so vm.info reports Shutdown. */
	pthread_t waiter;
	bool waiter_started;
	int stop_efd; /* written when the waiter returns, for a command-line VM; -1 if none */
	enum vm_exit_reason wait_reason;
	const char *allowed_dir; /* "" or NULL: clients may name any path */
	json_t *extra;		 /* vm.create's accepted cloud-hypervisor fields, for vm.info */
};

void api_vmm_init(struct api_vmm *vmm, const struct api_vm_ops *ops, struct vm *vm);
/* Starts the waiter of a booted VM (no-op without ops->wait). 0 or a negative errno. */
int api_vmm_watch(struct api_vmm *vmm);
/* Stops the VM if it still runs and joins its waiter: required before ops->destroy. */
void api_vmm_unwatch(struct api_vmm *vmm);
/* Shuts down and destroys a VM the API created; leaves a command-line VM to its owner. */
void api_vmm_release(struct api_vmm *vmm);

/* One parsed request. body is NUL-terminated (body[body_len] == 0). */
#define API_MAX_FDS 8 /* fds one request may carry (SCM_RIGHTS): vm.add-net's taps */

struct api_request {
	enum http_method method;
	char path[API_MAX_URL + 1];
	char *body;
	size_t body_len;
	/* fds that came with the request's bytes; the server closes them after the answer (a
	 * route keeps duplicates of what it uses) */
	const int *fds;
	unsigned nfds;
};

struct api_response {
	int status;
	char *body;	   /* malloc'd JSON text or NULL for an empty answer */
	const char *allow; /* Allow header for 405 */
};

void api_response_free(struct api_response *r);
/* Sets r to status with {"error": msg}. */
void api_response_error(struct api_response *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* router.c */
/* A snapshot URL (file:///DIR, the only scheme) to its directory: 0, or -EINVAL with err. */
int api_snapshot_url(const char *url, char *dir, size_t len, char *err, unsigned errlen);
/* vm.restore and `lvmm run --restore`: the config of the snapshot in dir (its files checked
 * against allowed_dir), then ops->restore with the memory restore mode (enum
 * config_mem_restore) and prefault; *extra as for vm.create (may be NULL). */
int api_restore_vm(const struct api_vm_ops *ops, const char *allowed_dir, const char *dir,
		   int mem_restore, bool prefault, struct vm **out, json_t **extra, char *err,
		   unsigned errlen);
/* cloud-hypervisor's memory_restore_mode, any case: Copy or OnDemand as a config_mem_restore
 * value, -1 for anything else. */
int api_mem_restore_mode(const char *s);
void api_route(struct api_vmm *vmm, const struct api_request *req, struct api_response *resp);

/* http.c: incremental request parser with size limits. Feed bytes with api_http_parse until
 * ready; then either req is complete or error_status says what to answer (and close). */
struct api_http {
	http_parser parser;
	struct api_request req;
	size_t url_len;
	size_t header_bytes;
	size_t body_cap;
	int error_status;
	char error_msg[API_ERR_LEN];
	bool ready;
	bool keep_alive;
	bool started; /* some bytes of the current request arrived */
	/* "Expect: 100-continue" (curl sends it for bodies over 1 KiB): the server answers
	 * "100 Continue" once the headers passed the limits, instead of making curl wait. */
	char field[16];
	size_t field_len;
	bool field_is_expect;
	bool headers_done;
	bool expect_continue;
	bool continue_sent;
};

void api_http_init(struct api_http *h);
void api_http_free(struct api_http *h);
/* Returns bytes consumed; stops right after a complete request. len 0 signals end of input. */
size_t api_http_parse(struct api_http *h, const char *data, size_t len);
/* Drops the finished request and prepares for the next one on the same connection. */
void api_http_next(struct api_http *h);
/* Formats a whole HTTP/1.1 answer; returns malloc'd bytes and their length, or NULL. */
char *api_http_format(const struct api_response *r, bool keep_alive, size_t *len);

/* json.c */
int api_json_to_config(const json_t *root, const struct api_vm_ops *ops, struct vm_config *cfg,
		       char *err, unsigned errlen);
/* A DiskConfig object (where names it in errors) into c; 0 or -EINVAL with err set. */
int api_json_to_disk(const json_t *obj, const char *where, struct virtio_blk_config *c, char *err,
		     unsigned errlen);
json_t *api_disk_to_json(const struct virtio_blk_config *c);
int api_json_to_net(const json_t *obj, const char *where, struct virtio_net_config *c, char *err,
		    unsigned errlen);
json_t *api_net_to_json(const struct virtio_net_config *c, unsigned idx);
int api_json_to_fs(const json_t *obj, const char *where, struct virtio_fs_config *c, char *err,
		   unsigned errlen);
json_t *api_fs_to_json(const struct virtio_fs_config *c, unsigned idx);
/* cloud-hypervisor's DeviceConfig (vm.create's devices, vm.add-device): path, id, iommu,
 * pci_segment; any other field is refused by name. */
int api_json_to_device(const json_t *obj, const char *where, struct vfio_pci_config *c, char *err,
		       unsigned errlen);
json_t *api_device_to_json(const struct vfio_pci_config *c, unsigned idx);
int api_json_to_vsock(const json_t *obj, const char *where, struct virtio_vsock_config *c,
		      char *err, unsigned errlen);
json_t *api_vsock_to_json(const struct virtio_vsock_config *c);
int api_json_to_vnvme(const json_t *obj, const char *where, struct vnvme_config *c, char *err,
		      unsigned errlen);
/* The same, keeping in *extra (when not NULL; the caller owns it) what vm.info reports beyond
 * struct vm_config: the cloud-hypervisor fields accepted at their defaults. */
int api_json_to_config_ch(const json_t *root, const struct api_vm_ops *ops, struct vm_config *cfg,
			  json_t **extra, char *err, unsigned errlen);
json_t *api_config_to_json(const struct vm_config *cfg);
/* vm.info's config: api_config_to_json merged with extra (may be NULL). */
json_t *api_config_to_json_ch(const struct vm_config *cfg, const json_t *extra);
json_t *api_vnvme_to_json(const struct vnvme_config *c);
const char *api_serial_mode_name(enum serial_mode m);
const char *api_vnvme_mode_name(enum vnvme_mode m);

/* server.c */
/* Binds a listening Unix socket at path: replaces a stale socket file, refuses when a live
 * server answers on it or when path is not a socket. Returns the fd or a negative errno. */
int api_socket_listen(const char *path, char *err, unsigned errlen);
/* Serves until vmm.shutdown or stop_fd (an eventfd, or -1) becomes readable. */
int api_serve(struct api_vmm *vmm, int listen_fd, int stop_fd, int idle_timeout_ms);
/* api_serve in parts, for a caller that runs the loop itself (the fuzz harness drives it over
 * socketpairs in one thread): listen_fd and stop_fd may be -1; *err set on NULL. */
struct api_server;
struct api_server *api_server_new(struct api_vmm *vmm, int listen_fd, int stop_fd,
				  int idle_timeout_ms, int *err);
/* Takes a connected non-blocking stream socket as if accepted (closes it on failure). */
int api_server_adopt(struct api_server *s, int fd);
/* One pass of the loop: waits up to max_wait_ms (-1: until the next deadline) and handles what
 * came; the number of events, or -ESHUTDOWN once the server is done, or another -errno. */
int api_server_turn(struct api_server *s, int max_wait_ms);
void api_server_free(struct api_server *s);
/* The server's millisecond clock; NULL (the default) is CLOCK_MONOTONIC. */
extern uint64_t (*api_server_clock)(void);

#endif
