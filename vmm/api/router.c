/* API endpoints under /api/v1 (cloud-hypervisor names and verbs) and the VM state machine:
 * a request invalid in the current state answers 4xx and changes nothing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "api/api_internal.h"
#include "serial.h"

#define ROUTE_MAX_COUNTERS 32

typedef void (*route_fn)(struct api_vmm *vmm, const struct api_request *req,
			 struct api_response *resp);

struct route {
	const char *name;
	enum http_method method;
	bool needs_body;
	route_fn fn;
};

/* Maps the negative errno of a VM operation to the answer's status. */
static int route_errno_status(int r)
{
	switch (-r) {
	case EINVAL:
	case ENOENT:
	case ERANGE:
	case E2BIG:
	case ENAMETOOLONG:
	case EISDIR:
	case ENOEXEC:
	case EACCES:
		return 400;
	case EBUSY:
	case EALREADY:
	case EEXIST:
		return 409;
	case EOPNOTSUPP:
	case ENOSYS:
		return 501;
	default:
		return 500;
	}
}

static void route_op_error(struct api_response *resp, const char *what, int r, const char *err)
{
	api_response_error(resp, route_errno_status(r), "%s: %s", what, *err ? err : strerror(-r));
}

static void route_json(struct api_response *resp, json_t *o)
{
	if (!o) {
		api_response_error(resp, 500, "out of memory building the answer");
		return;
	}
	resp->status = 200;
	resp->body = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!resp->body)
		api_response_error(resp, 500, "cannot encode the answer as JSON");
}

/* Loads a request body; on a syntax error fills resp with 400 and returns NULL. */
static json_t *route_load_body(const struct api_request *req, struct api_response *resp)
{
	json_error_t jerr;
	json_t *j;

	j = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
	if (!j)
		api_response_error(resp, 400, "malformed JSON at line %d column %d: %s", jerr.line,
				   jerr.column, jerr.text);
	return j;
}

/* Fills resp and returns false when there is no VM (404) or it is not in one of states (405),
 * the codes cloud-hypervisor's OpenAPI file gives. */
static bool route_need_state(struct api_vmm *vmm, struct api_response *resp, const char *what,
			     unsigned states)
{
	enum vm_state s;

	if (!vmm->vm) {
		api_response_error(resp, 404, "%s: no VM created (use vm.create first)", what);
		return false;
	}
	s = vmm->ops->get_state(vmm->vm);
	if (!(states & (1u << s))) {
		api_response_error(resp, 405, "%s: not allowed while the VM is %s", what,
				   vm_state_name(s));
		return false;
	}
	return true;
}

#define ST(s)  (1u << (s))
#define ST_ANY (ST(VM_CREATED) | ST(VM_RUNNING) | ST(VM_PAUSED) | ST(VM_SHUTDOWN))

static void route_vmm_ping(struct api_vmm *vmm, const struct api_request *req,
			   struct api_response *resp)
{
	route_json(resp, json_pack("{s:s, s:s, s:I, s:[s]}", "build_version", "lvmm " API_VERSION,
				   "version", API_VERSION, "pid", (json_int_t)getpid(), "features",
				   "vnvme"));
}

static void route_vmm_shutdown(struct api_vmm *vmm, const struct api_request *req,
			       struct api_response *resp)
{
	char err[API_ERR_LEN] = "";
	int r;

	/* A command-line VM is stopped here; lvmm exits once its waiter sees it stop. An API
	 * VM is shut down and destroyed by api_vmm_release() after the last answer is sent. */
	if (vmm->vm && vmm->vm_external) {
		enum vm_state s = vmm->ops->get_state(vmm->vm);

		if (s == VM_RUNNING || s == VM_PAUSED) {
			r = vmm->ops->shutdown(vmm->vm, err, sizeof(err));
			if (r) {
				route_op_error(resp, "vmm.shutdown", r, err);
				return;
			}
		}
	}
	vmm->shutdown = true;
	resp->status = 204;
}

/* Every file a client names, checked before anything opens it: not a symlink, not a FIFO or
 * device where a regular file is meant, beneath the allowed directory when there is one. A FIFO
 * would otherwise block the only API thread in open(2). The serial file is opened at boot, under
 * the same rules (vm_console.c); a disk image or serial file may still be created. */
static int route_check_vnvme(const struct api_vmm *vmm, const struct vnvme_config *v, char *err,
			     unsigned errlen)
{
	/* A missing image is the backend's to report (it may create one); only what could hang
	 * or escape is refused here. */
	if (!v->path[0] || !vmm->ops->check_path)
		return 0;
	return vmm->ops->check_path(vmm->allowed_dir, "vnvme file", v->path, true,
				    FSUTIL_REGULAR_OR_BLOCK, err, errlen);
}

/* A disk image must exist (virtio-blk never creates one). */
static int route_check_disk(const struct api_vmm *vmm, const struct virtio_blk_config *d, char *err,
			    unsigned errlen)
{
	if (!vmm->ops->check_path)
		return 0;
	return vmm->ops->check_path(vmm->allowed_dir, "disk image", d->path, false,
				    FSUTIL_REGULAR_OR_BLOCK, err, errlen);
}

/* The vsock socket lvmm will listen at: absent or a stale socket, beneath the allowed dir. */
static int route_check_vsock(const struct api_vmm *vmm, const struct virtio_vsock_config *v,
			     char *err, unsigned errlen)
{
	if (!vmm->ops->check_path)
		return 0;
	return vmm->ops->check_path(vmm->allowed_dir, "vsock socket", v->socket, true,
				    FSUTIL_SOCKET, err, errlen);
}

/* A virtio-fs back end's socket: present, a socket, beneath the allowed dir. */
static int route_check_fs(const struct api_vmm *vmm, const struct virtio_fs_config *f, char *err,
			  unsigned errlen)
{
	if (!vmm->ops->check_path)
		return 0;
	return vmm->ops->check_path(vmm->allowed_dir, "fs socket", f->socket, false, FSUTIL_SOCKET,
				    err, errlen);
}

static int route_check_paths(const struct api_vmm *vmm, const struct vm_config *cfg, char *err,
			     unsigned errlen)
{
	const char *root = vmm->allowed_dir;
	unsigned i;
	int r;

	if (!vmm->ops->check_path)
		return 0;
	r = vmm->ops->check_path(root, "kernel", cfg->kernel, false, FSUTIL_REGULAR, err, errlen);
	if (!r && cfg->initramfs[0])
		r = vmm->ops->check_path(root, "initramfs", cfg->initramfs, false, FSUTIL_REGULAR,
					 err, errlen);
	if (!r && cfg->serial == SERIAL_FILE)
		r = vmm->ops->check_path(root, "serial file", cfg->serial_file, true,
					 FSUTIL_REGULAR, err, errlen);
	for (i = 0; !r && i < cfg->nvnvme && i < CONFIG_MAX_VNVME; i++)
		r = route_check_vnvme(vmm, &cfg->vnvme[i], err, errlen);
	for (i = 0; !r && i < cfg->ndisks && i < CONFIG_MAX_DISKS; i++)
		r = route_check_disk(vmm, &cfg->disks[i], err, errlen);
	if (!r && cfg->has_vsock)
		r = route_check_vsock(vmm, &cfg->vsock, err, errlen);
	for (i = 0; !r && i < cfg->nfs && i < CONFIG_MAX_FS; i++)
		r = route_check_fs(vmm, &cfg->fs[i], err, errlen);
	return r;
}

static void route_vm_create(struct api_vmm *vmm, const struct api_request *req,
			    struct api_response *resp)
{
	char err[API_ERR_LEN] = "";
	struct vm_config *cfg;
	struct vm *vm = NULL;
	json_t *j, *extra = NULL;
	int r;

	if (vmm->vm) {
		api_response_error(resp, 409,
				   "vm.create: a VM already exists (state %s); "
				   "vm.delete it first",
				   vm_state_name(vmm->ops->get_state(vmm->vm)));
		return;
	}
	j = route_load_body(req, resp);
	if (!j)
		return;
	cfg = malloc(sizeof(*cfg));
	if (!cfg) {
		json_decref(j);
		api_response_error(resp, 500, "vm.create: out of memory");
		return;
	}
	r = api_json_to_config_ch(j, vmm->ops, cfg, &extra, err, sizeof(err));
	json_decref(j);
	if (!r)
		r = route_check_paths(vmm, cfg, err, sizeof(err));
	if (r) {
		api_response_error(resp, 400, "vm.create: %s", err);
		json_decref(extra);
		free(cfg);
		return;
	}
	snprintf(cfg->allowed_dir, sizeof(cfg->allowed_dir), "%s",
		 vmm->allowed_dir ? vmm->allowed_dir : "");
	r = vmm->ops->create(cfg, &vm, err, sizeof(err));
	free(cfg);
	if (r) {
		json_decref(extra);
		route_op_error(resp, "vm.create", r, err);
		return;
	}
	vmm->vm = vm;
	vmm->vm_owned = true;
	json_decref(vmm->extra);
	vmm->extra = extra;
	resp->status = 204;
}

/* Boot after a shutdown rebuilds the VM from its config, as cloud-hypervisor does. */
static int route_recreate(struct api_vmm *vmm, char *err, unsigned errlen)
{
	struct vm_config *cfg = malloc(sizeof(*cfg));
	struct vm *vm = NULL;
	int r;

	if (!cfg) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	memcpy(cfg, vmm->ops->get_config(vmm->vm), sizeof(*cfg));
	api_vmm_unwatch(vmm);
	vmm->ops->destroy(vmm->vm);
	vmm->vm = NULL;
	vmm->vm_owned = false;
	r = vmm->ops->create(cfg, &vm, err, errlen);
	free(cfg);
	if (r)
		return r;
	vmm->vm = vm;
	vmm->vm_owned = true;
	return 0;
}

static void route_vm_boot(struct api_vmm *vmm, const struct api_request *req,
			  struct api_response *resp)
{
	char err[API_ERR_LEN] = "";
	unsigned ok = ST(VM_CREATED) | (vmm->vm_owned ? ST(VM_SHUTDOWN) : 0);
	int r;

	if (!route_need_state(vmm, resp, "vm.boot", ok))
		return;
	if (vmm->ops->get_state(vmm->vm) == VM_SHUTDOWN) {
		r = route_recreate(vmm, err, sizeof(err));
		if (r) {
			route_op_error(resp, "vm.boot: re-creating the VM", r, err);
			return;
		}
	}
	r = vmm->ops->boot(vmm->vm, err, sizeof(err));
	if (r) {
		/* A boot that failed half-way (some vCPUs started) is settled to Shutdown, so
		 * the VM can be booted again or deleted. */
		if (vmm->ops->get_state(vmm->vm) != VM_CREATED)
			api_vmm_unwatch(vmm);
		route_op_error(resp, "vm.boot", r, err);
		return;
	}
	r = api_vmm_watch(vmm);
	if (r) {
		/* Without a waiter nobody would notice the guest stopping: do not run blind. */
		api_vmm_unwatch(vmm);
		api_response_error(resp, 500, "vm.boot: cannot start the VM waiter thread: %s",
				   strerror(-r));
		return;
	}
	resp->status = 204;
}

static void route_simple(struct api_vmm *vmm, struct api_response *resp, const char *what,
			 unsigned states, int (*op)(struct vm *, char *, unsigned))
{
	char err[API_ERR_LEN] = "";
	int r;

	if (!route_need_state(vmm, resp, what, states))
		return;
	r = op(vmm->vm, err, sizeof(err));
	if (r) {
		route_op_error(resp, what, r, err);
		return;
	}
	resp->status = 204;
}

static void route_vm_pause(struct api_vmm *vmm, const struct api_request *req,
			   struct api_response *resp)
{
	route_simple(vmm, resp, "vm.pause", ST(VM_RUNNING), vmm->ops->pause);
}

static void route_vm_resume(struct api_vmm *vmm, const struct api_request *req,
			    struct api_response *resp)
{
	route_simple(vmm, resp, "vm.resume", ST(VM_PAUSED), vmm->ops->resume);
}

static void route_vm_shutdown(struct api_vmm *vmm, const struct api_request *req,
			      struct api_response *resp)
{
	route_simple(vmm, resp, "vm.shutdown", ST(VM_RUNNING) | ST(VM_PAUSED), vmm->ops->shutdown);
	/* The waiter may be the one collecting the vCPU threads: once it is joined the state
	 * reads Shutdown, so a vm.info right after this answer never sees Running. */
	if (resp->status == 204 && vmm->waiter_started) {
		pthread_join(vmm->waiter, NULL);
		vmm->waiter_started = false;
	}
}

static void route_vm_reboot(struct api_vmm *vmm, const struct api_request *req,
			    struct api_response *resp)
{
	/* A reset works on a paused VM too: it comes back Running, as on a power cycle. */
	route_simple(vmm, resp, "vm.reboot", ST(VM_RUNNING) | ST(VM_PAUSED), vmm->ops->reboot);
}

static void route_vm_delete(struct api_vmm *vmm, const struct api_request *req,
			    struct api_response *resp)
{
	char err[API_ERR_LEN] = "";
	enum vm_state s;
	int r;

	resp->status = 204;
	if (!vmm->vm)
		return; /* nothing to delete: cloud-hypervisor answers success too */
	s = vmm->ops->get_state(vmm->vm);
	if (s == VM_RUNNING || s == VM_PAUSED) {
		r = vmm->ops->shutdown(vmm->vm, err, sizeof(err));
		/* An API VM is destroyed below in any state; a command-line VM must stop here. */
		if (r && vmm->vm_external) {
			route_op_error(resp, "vm.delete", r, err);
			return;
		}
	}
	api_vmm_release(vmm);
}

static void route_vm_info(struct api_vmm *vmm, const struct api_request *req,
			  struct api_response *resp)
{
	json_t *cfg;

	if (!route_need_state(vmm, resp, "vm.info", ST_ANY))
		return;
	cfg = api_config_to_json_ch(vmm->ops->get_config(vmm->vm), vmm->extra);
	if (!cfg) {
		api_response_error(resp, 500, "vm.info: cannot encode the VM config as JSON");
		return;
	}
	route_json(resp,
		   json_pack("{s:o, s:s, s:I}", "config", cfg, "state",
			     vm_state_name(vmm->ops->get_state(vmm->vm)), "memory_actual_size",
			     (json_int_t)vmm->ops->memory_actual(vmm->vm)));
}

static void route_vm_counters(struct api_vmm *vmm, const struct api_request *req,
			      struct api_response *resp)
{
	struct dev_counters c[ROUTE_MAX_COUNTERS];
	unsigned n, i;
	json_t *o;

	if (!route_need_state(vmm, resp, "vm.counters", ST_ANY))
		return;
	memset(c, 0, sizeof(c));
	n = vmm->ops->get_counters(vmm->vm, c, ROUTE_MAX_COUNTERS);
	if (n > ROUTE_MAX_COUNTERS)
		n = ROUTE_MAX_COUNTERS;
	o = json_object();
	for (i = 0; o && i < n; i++) {
		json_t *d, *qs = json_array();
		unsigned k;

		c[i].id[sizeof(c[i].id) - 1] = 0;
		c[i].mode[sizeof(c[i].mode) - 1] = 0;
		c[i].ssd[sizeof(c[i].ssd) - 1] = 0;
		c[i].volume[sizeof(c[i].volume) - 1] = 0;
		d = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "read_ops",
			      (json_int_t)c[i].reads, "write_ops", (json_int_t)c[i].writes,
			      "read_bytes", (json_int_t)c[i].read_bytes, "write_bytes",
			      (json_int_t)c[i].write_bytes, "flushes", (json_int_t)c[i].flushes,
			      "doorbells", (json_int_t)c[i].doorbells, "mmio_exits",
			      (json_int_t)c[i].mmio_exits, "irqs", (json_int_t)c[i].irqs);
		/* passthrough / isolated: the backend's counters per bound queue pair */
		for (k = 0; qs && k < c[i].nqueues && k < DEV_MAX_QUEUES; k++)
			json_array_append_new(
			    qs, json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I}", "qid",
					  (int)c[i].q[k].qid, "cmds", (json_int_t)c[i].q[k].cmds,
					  "read_bytes", (json_int_t)c[i].q[k].read_bytes,
					  "write_bytes", (json_int_t)c[i].q[k].write_bytes,
					  "errors", (json_int_t)c[i].q[k].errors, "rejected",
					  (json_int_t)c[i].q[k].rejected, "irqs",
					  (json_int_t)c[i].q[k].irqs));
		if (d) {
			json_object_set_new(d, "wakeups", json_integer((json_int_t)c[i].wakeups));
			json_object_set_new(d, "backend_cmds",
					    json_integer((json_int_t)c[i].backend_cmds));
			json_object_set_new(d, "backend_errors",
					    json_integer((json_int_t)c[i].backend_errors));
			json_object_set_new(d, "backend_rejected",
					    json_integer((json_int_t)c[i].backend_rejected));
			json_object_set_new(d, "db_switched",
					    json_integer((json_int_t)c[i].db_switched));
			json_object_set_new(d, "mode", json_string(c[i].mode));
			json_object_set_new(d, "ssd", json_string(c[i].ssd));
			json_object_set_new(d, "volume", json_string(c[i].volume));
			json_object_set_new(d, "queues", qs ? qs : json_array());
			if (c[i].net) {
				json_t *nc = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}",
						       "rx_frames", (json_int_t)c[i].rx_frames,
						       "rx_bytes", (json_int_t)c[i].rx_bytes,
						       "rx_dropped", (json_int_t)c[i].rx_dropped,
						       "tx_frames", (json_int_t)c[i].tx_frames,
						       "tx_bytes", (json_int_t)c[i].tx_bytes,
						       "tx_dropped", (json_int_t)c[i].tx_dropped);

				json_object_update(d, nc);
				json_decref(nc);
			}
		} else {
			json_decref(qs);
		}
		json_object_set_new(o, c[i].id, d);
	}
	if (o && vmm->ops->console_stats) {
		struct serial_stats st;

		/* What a test of a paused guest compares: tx stays put while no vCPU runs. */
		vmm->ops->console_stats(vmm->vm, &st);
		json_object_set_new(o, "console",
				    json_pack("{s:I, s:I, s:I}", "tx_bytes", (json_int_t)st.tx,
					      "written_bytes", (json_int_t)st.written,
					      "dropped_bytes", (json_int_t)st.dropped));
	}
	route_json(resp, o);
}

/* cloud-hypervisor's PciDeviceInfo for a device just hot-added; Kata parses bdf as 0000:00:SS.0 */
static void route_device_info(struct api_vmm *vmm, struct api_response *resp, const char *what,
			      const char *id)
{
	unsigned slot = 0;
	char bdf[16];

	if (!vmm->ops->device_slot || vmm->ops->device_slot(vmm->vm, id, &slot)) {
		api_response_error(resp, 500, "%s: %s: added but its PCI slot is unknown", what,
				   id);
		return;
	}
	snprintf(bdf, sizeof(bdf), "0000:00:%02x.0", slot & 0x1f);
	route_json(resp, json_pack("{s:s, s:s}", "id", id, "bdf", bdf));
}

static void route_vm_add_vnvme(struct api_vmm *vmm, const struct api_request *req,
			       struct api_response *resp)
{
	char err[API_ERR_LEN] = "";
	struct vnvme_config *c;
	json_t *j;
	int r;

	/* ACPI PCI hotplug: the guest is told at once, or when it runs again */
	if (!route_need_state(vmm, resp, "vm.add-vnvme", ST(VM_RUNNING) | ST(VM_PAUSED)))
		return;
	j = route_load_body(req, resp);
	if (!j)
		return;
	c = malloc(sizeof(*c));
	if (!c) {
		json_decref(j);
		api_response_error(resp, 500, "vm.add-vnvme: out of memory");
		return;
	}
	r = api_json_to_vnvme(j, "vnvme", c, err, sizeof(err));
	json_decref(j);
	if (!r)
		r = route_check_vnvme(vmm, c, err, sizeof(err));
	if (r) {
		api_response_error(resp, 400, "vm.add-vnvme: %s", err);
		goto out;
	}
	r = vmm->ops->add_vnvme(vmm->vm, c, err, sizeof(err));
	if (r == -EEXIST) {
		api_response_error(resp, 400, "vm.add-vnvme: %s", err); /* the body's id is taken */
		goto out;
	}
	if (r) {
		route_op_error(resp, "vm.add-vnvme", r, err);
		goto out;
	}
	route_device_info(vmm, resp, "vm.add-vnvme", c->id);
out:
	free(c);
}

static void route_vm_add_disk(struct api_vmm *vmm, const struct api_request *req,
			      struct api_response *resp)
{
	char err[API_ERR_LEN] = "";
	struct virtio_blk_config *c;
	json_t *j;
	int r;

	if (!route_need_state(vmm, resp, "vm.add-disk", ST(VM_RUNNING) | ST(VM_PAUSED)))
		return;
	if (!vmm->ops->add_disk) {
		api_response_error(resp, 500, "vm.add-disk: not available");
		return;
	}
	j = route_load_body(req, resp);
	if (!j)
		return;
	c = malloc(sizeof(*c));
	if (!c) {
		json_decref(j);
		api_response_error(resp, 500, "vm.add-disk: out of memory");
		return;
	}
	r = api_json_to_disk(j, "disk", c, err, sizeof(err));
	json_decref(j);
	if (!r)
		r = route_check_disk(vmm, c, err, sizeof(err));
	if (r) {
		api_response_error(resp, 400, "vm.add-disk: %s", err);
		goto out;
	}
	r = vmm->ops->add_disk(vmm->vm, c, err, sizeof(err));
	if (r == -EEXIST)
		api_response_error(resp, 400, "vm.add-disk: %s", err); /* the body's id is taken */
	else if (r)
		route_op_error(resp, "vm.add-disk", r, err);
	else
		route_device_info(vmm, resp, "vm.add-disk", c->id);
out:
	free(c);
}

/* cloud-hypervisor's vm.add-net: the tap fds come with the request (SCM_RIGHTS), in the body's
 * "fds" order; before vm.boot the device joins the configuration (204), afterwards it is
 * hot-added (PciDeviceInfo). */
static void route_vm_add_net(struct api_vmm *vmm, const struct api_request *req,
			     struct api_response *resp)
{
	char err[API_ERR_LEN] = "";
	struct virtio_net_config c;
	enum vm_state st;
	json_t *j;
	int r;

	if (!route_need_state(vmm, resp, "vm.add-net",
			      ST(VM_CREATED) | ST(VM_RUNNING) | ST(VM_PAUSED)))
		return;
	if (!vmm->ops->add_net) {
		api_response_error(resp, 500, "vm.add-net: not available");
		return;
	}
	j = route_load_body(req, resp);
	if (!j)
		return;
	r = api_json_to_net(j, "net", &c, err, sizeof(err));
	json_decref(j);
	if (!r && c.nfds && c.nfds != req->nfds) {
		snprintf(err, sizeof(err),
			 "'net.fds' lists %u fds, the request carried %u (SCM_RIGHTS)", c.nfds,
			 req->nfds);
		r = -EINVAL;
	}
	if (!r && req->nfds) {
		/* the received fds, whatever numbers the client's side gave them */
		if (req->nfds > VIRTIO_NET_MAX_PAIRS) {
			snprintf(err, sizeof(err), "%u fds, at most %d", req->nfds,
				 VIRTIO_NET_MAX_PAIRS);
			r = -EINVAL;
		} else {
			memcpy(c.fds, req->fds, req->nfds * sizeof(int));
			c.nfds = req->nfds;
			if (!c.num_queues)
				c.num_queues = 2 * c.nfds;
		}
	}
	if (r) {
		api_response_error(resp, 400, "vm.add-net: %s", err);
		return;
	}
	st = vmm->ops->get_state(vmm->vm);
	r = vmm->ops->add_net(vmm->vm, &c, err, sizeof(err));
	if (r == -EEXIST || r == -EINVAL)
		api_response_error(resp, 400, "vm.add-net: %s", err);
	else if (r)
		route_op_error(resp, "vm.add-net", r, err);
	else if (st == VM_CREATED)
		resp->status = 204;
	else
		route_device_info(vmm, resp, "vm.add-net", c.id);
}

static void route_vm_add_vsock(struct api_vmm *vmm, const struct api_request *req,
			       struct api_response *resp)
{
	char err[API_ERR_LEN] = "", id[64];
	struct virtio_vsock_config c;
	json_t *j;
	int r;

	if (!route_need_state(vmm, resp, "vm.add-vsock", ST(VM_RUNNING) | ST(VM_PAUSED)))
		return;
	if (!vmm->ops->add_vsock) {
		api_response_error(resp, 500, "vm.add-vsock: not available");
		return;
	}
	j = route_load_body(req, resp);
	if (!j)
		return;
	r = api_json_to_vsock(j, "vsock", &c, err, sizeof(err));
	json_decref(j);
	if (!r)
		r = route_check_vsock(vmm, &c, err, sizeof(err));
	if (r) {
		api_response_error(resp, 400, "vm.add-vsock: %s", err);
		return;
	}
	virtio_vsock_id(&c, id, sizeof(id));
	r = vmm->ops->add_vsock(vmm->vm, &c, err, sizeof(err));
	if (r == -EEXIST)
		api_response_error(resp, 400, "vm.add-vsock: %s", err);
	else if (r)
		route_op_error(resp, "vm.add-vsock", r, err);
	else
		route_device_info(vmm, resp, "vm.add-vsock", id);
}

static void route_vm_add_fs(struct api_vmm *vmm, const struct api_request *req,
			    struct api_response *resp)
{
	char err[API_ERR_LEN] = "";
	struct virtio_fs_config c;
	json_t *j;
	int r;

	if (!route_need_state(vmm, resp, "vm.add-fs", ST(VM_RUNNING) | ST(VM_PAUSED)))
		return;
	if (!vmm->ops->add_fs) {
		api_response_error(resp, 500, "vm.add-fs: not available");
		return;
	}
	j = route_load_body(req, resp);
	if (!j)
		return;
	r = api_json_to_fs(j, "fs", &c, err, sizeof(err));
	json_decref(j);
	if (!r)
		r = route_check_fs(vmm, &c, err, sizeof(err));
	if (r) {
		api_response_error(resp, 400, "vm.add-fs: %s", err);
		return;
	}
	r = vmm->ops->add_fs(vmm->vm, &c, err, sizeof(err));
	if (r == -EEXIST || r == -ENOSPC)
		api_response_error(resp, 400, "vm.add-fs: %s", err);
	else if (r)
		route_op_error(resp, "vm.add-fs", r, err);
	else
		route_device_info(vmm, resp, "vm.add-fs", c.id);
}

/* cloud-hypervisor's vm.add-device: DeviceConfig in, PciDeviceInfo out. The path names a host
 * PCI function (sysfs), not a file: what lvmm may open of it is /dev/vfio's permissions' say. */
static void route_vm_add_device(struct api_vmm *vmm, const struct api_request *req,
				struct api_response *resp)
{
	char err[API_ERR_LEN] = "";
	struct vfio_pci_config c;
	json_t *j;
	int r;

	if (!route_need_state(vmm, resp, "vm.add-device", ST(VM_RUNNING) | ST(VM_PAUSED)))
		return;
	if (!vmm->ops->add_device) {
		api_response_error(resp, 500, "vm.add-device: not available");
		return;
	}
	j = route_load_body(req, resp);
	if (!j)
		return;
	r = api_json_to_device(j, "device", &c, err, sizeof(err));
	json_decref(j);
	if (r) {
		api_response_error(resp, 400, "vm.add-device: %s", err);
		return;
	}
	r = vmm->ops->add_device(vmm->vm, &c, err, sizeof(err));
	/* a function that cannot be opened (no VFIO, not bound to vfio-pci) is the client's */
	if (r == -EEXIST || r == -ENOSPC || r == -EINVAL || r == -ENODEV)
		api_response_error(resp, 400, "vm.add-device: %s", err);
	else if (r)
		route_op_error(resp, "vm.add-device", r, err);
	else
		route_device_info(vmm, resp, "vm.add-device", c.id);
}

static void route_vm_remove_device(struct api_vmm *vmm, const struct api_request *req,
				   struct api_response *resp)
{
	char err[API_ERR_LEN] = "";
	const char *k;
	json_t *j, *v, *id = NULL;
	int r;

	if (!route_need_state(vmm, resp, "vm.remove-device", ST(VM_RUNNING) | ST(VM_PAUSED)))
		return;
	j = route_load_body(req, resp);
	if (!j)
		return;
	if (!json_is_object(j)) {
		api_response_error(resp, 400, "vm.remove-device: body must be {\"id\": \"...\"}");
		goto out;
	}
	json_object_foreach(j, k, v)
	{
		if (strcmp(k, "id")) {
			api_response_error(resp, 400, "vm.remove-device: unknown field '%s'", k);
			goto out;
		}
		id = v;
	}
	if (!json_is_string(id) || !json_string_length(id) ||
	    json_string_length(id) >= sizeof(((struct vnvme_config *)0)->id) ||
	    memchr(json_string_value(id), 0, json_string_length(id))) {
		api_response_error(resp, 400,
				   "vm.remove-device: field 'id' must be a device id "
				   "string of 1..63 bytes");
		goto out;
	}
	/* 204 once the guest ejected the device and lvmm tore it down; an unknown id is 404 */
	r = vmm->ops->remove_device(vmm->vm, json_string_value(id), err, sizeof(err));
	if (r == -ENOENT)
		api_response_error(resp, 404, "vm.remove-device: %s", err);
	else if (r)
		route_op_error(resp, "vm.remove-device", r, err);
	else
		resp->status = 204;
out:
	json_decref(j);
}

/* vm.resize (cloud-hypervisor's VmResize): Kata sends it for every container. What already
 * holds answers 204; lvmm hot-plugs neither vCPUs nor RAM, so a change is refused naming it. */
static void route_vm_resize(struct api_vmm *vmm, const struct api_request *req,
			    struct api_response *resp)
{
	static const char *const keys[] = {"desired_vcpus", "desired_ram", "desired_balloon", NULL};
	const struct vm_config *cfg;
	const char *k;
	json_t *j, *v;

	if (!route_need_state(vmm, resp, "vm.resize",
			      ST(VM_CREATED) | ST(VM_RUNNING) | ST(VM_PAUSED)))
		return;
	j = route_load_body(req, resp);
	if (!j)
		return;
	cfg = vmm->ops->get_config(vmm->vm);
	if (!json_is_object(j)) {
		api_response_error(resp, 400, "vm.resize: body must be a VmResize object");
		goto out;
	}
	json_object_foreach(j, k, v)
	{
		const char *const *p;

		for (p = keys; *p && strcmp(*p, k); p++)
			;
		if (!*p || json_is_null(v))
			continue; /* ignored, as cloud-hypervisor ignores unknown keys */
		if (!json_is_integer(v) || json_integer_value(v) < 0) {
			api_response_error(
			    resp, 400, "vm.resize: field '%s' must be a non-negative integer", k);
			goto out;
		}
	}
	v = json_object_get(j, "desired_vcpus");
	if (json_is_integer(v)) {
		json_int_t n = json_integer_value(v);

		if (n < 1 || n > (json_int_t)cfg->max_cpus) {
			api_response_error(
			    resp, 400, "vm.resize: desired_vcpus %lld is outside 1..max_vcpus %u",
			    (long long)n, cfg->max_cpus);
			goto out;
		}
		if (n != (json_int_t)cfg->cpus) {
			api_response_error(resp, 501,
					   "vm.resize: desired_vcpus %lld: vCPU hotplug is not "
					   "supported (the VM keeps its %u boot vCPUs)",
					   (long long)n, cfg->cpus);
			goto out;
		}
	}
	v = json_object_get(j, "desired_ram");
	if (json_is_integer(v)) {
		uint64_t ram = (uint64_t)json_integer_value(v);

		if (ram < cfg->memory) {
			api_response_error(
			    resp, 400,
			    "vm.resize: desired_ram %llu is below the boot RAM %llu: "
			    "RAM cannot shrink",
			    (unsigned long long)ram, (unsigned long long)cfg->memory);
			goto out;
		}
		if (ram > cfg->memory) {
			api_response_error(resp, 501,
					   "vm.resize: desired_ram %llu: memory hotplug is not "
					   "supported (no hotplug region; the VM keeps %llu bytes)",
					   (unsigned long long)ram,
					   (unsigned long long)cfg->memory);
			goto out;
		}
	}
	v = json_object_get(j, "desired_balloon");
	if (json_is_integer(v) && json_integer_value(v)) {
		api_response_error(resp, 400, "vm.resize: desired_balloon: the VM has no balloon");
		goto out;
	}
	resp->status = 204;
out:
	json_decref(j);
}

/* ---- snapshots (docs/snapshot.md) ---- */

int api_snapshot_url(const char *url, char *dir, size_t len, char *err, unsigned errlen)
{
	static const char scheme[] = "file://";

	if (strncmp(url, scheme, strlen(scheme)) || url[strlen(scheme)] != '/') {
		snprintf(err, errlen,
			 "'%.200s' is not a file:///DIR URL (the only kind lvmm takes)", url);
		return -EINVAL;
	}
	if (strlen(url + strlen(scheme)) >= len) {
		snprintf(err, errlen, "the snapshot directory's path is too long");
		return -EINVAL;
	}
	snprintf(dir, len, "%s", url + strlen(scheme));
	return 0;
}

/* The three files of a snapshot beneath the allowed directory (may_create: the snapshot's). */
static int route_check_snapshot_dir(const struct api_vmm *vmm, const char *allowed_dir,
				    const char *dir, bool may_create, char *err, unsigned errlen)
{
	static const char *const files[] = {"config.json", "state.bin", "memory.bin"};
	char path[CONFIG_PATH_MAX + 32];

	if (!vmm->ops->check_path || !allowed_dir || !allowed_dir[0])
		return 0;
	for (unsigned i = 0; i < 3; i++) {
		int r;

		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		r = vmm->ops->check_path(allowed_dir, "snapshot file", path, may_create,
					 FSUTIL_REGULAR, err, errlen);
		if (r)
			return r;
	}
	return 0;
}

int api_mem_restore_mode(const char *s)
{
	if (!strcasecmp(s, "Copy"))
		return CONFIG_MEM_RESTORE_COPY;
	if (!strcasecmp(s, "OnDemand"))
		return CONFIG_MEM_RESTORE_ONDEMAND;
	return -1;
}

int api_restore_vm(const struct api_vm_ops *ops, const char *allowed_dir, const char *dir,
		   int mem_restore, bool prefault, struct vm **out, json_t **extra, char *err,
		   unsigned errlen)
{
	struct api_vmm probe;
	struct vm_config *cfg;
	json_error_t jerr;
	char *config = NULL;
	size_t len = 0;
	json_t *j;
	int r, dirfd;

	*out = NULL;
	if (extra)
		*extra = NULL;
	if (!ops->restore) {
		snprintf(err, errlen, "not implemented: this lvmm cannot restore");
		return -EOPNOTSUPP;
	}
	api_vmm_init(&probe, ops, NULL);
	probe.allowed_dir = allowed_dir;
	r = route_check_snapshot_dir(&probe, allowed_dir, dir, false, err, errlen);
	/* one directory fd for the three files: the path is not looked up again */
	dirfd = r ? -1 : fsutil_open_dir(allowed_dir, "snapshot directory", dir, err, errlen);
	if (!r && dirfd < 0)
		r = -EINVAL;
	if (!r)
		r = vm_snapshot_read_config(dirfd, &config, &len, err, errlen);
	if (r) {
		if (dirfd >= 0)
			close(dirfd);
		return r;
	}
	j = json_loadb(config, len, JSON_REJECT_DUPLICATES, &jerr);
	cfg = malloc(sizeof(*cfg));
	if (!j || !cfg) {
		snprintf(err, errlen, "config.json: %s",
			 j ? "out of memory" : "malformed JSON (not an lvmm snapshot?)");
		json_decref(j);
		free(cfg);
		free(config);
		close(dirfd);
		return -EINVAL;
	}
	r = api_json_to_config_ch(j, ops, cfg, extra, err, errlen);
	json_decref(j);
	if (!r)
		r = route_check_paths(&probe, cfg, err, errlen);
	if (!r) {
		snprintf(cfg->allowed_dir, sizeof(cfg->allowed_dir), "%s",
			 allowed_dir ? allowed_dir : "");
		cfg->mem_restore = (enum config_mem_restore)mem_restore;
		cfg->mem_prefault = prefault;
		r = ops->restore(cfg, dirfd, config, len, out, err, errlen);
	} else {
		r = -EINVAL;
	}
	if (r && extra) {
		json_decref(*extra);
		*extra = NULL;
	}
	free(cfg);
	free(config);
	close(dirfd);
	return r;
}

static void route_vm_snapshot(struct api_vmm *vmm, const struct api_request *req,
			      struct api_response *resp)
{
	char err[API_ERR_LEN] = "", dir[CONFIG_PATH_MAX];
	struct vm_snapshot_stats st;
	json_t *j, *cfg;
	const char *url = NULL;
	char *config = NULL;
	int r, dirfd;

	if (!route_need_state(vmm, resp, "vm.snapshot", ST(VM_PAUSED)))
		return;
	if (!vmm->ops->snapshot) {
		api_response_error(resp, 501, "vm.snapshot: not implemented here");
		return;
	}
	j = route_load_body(req, resp);
	if (!j)
		return;
	if (json_unpack(j, "{s:s}", "destination_url", &url) || !url) {
		api_response_error(resp, 400,
				   "vm.snapshot: destination_url (a string) is required");
		json_decref(j);
		return;
	}
	r = api_snapshot_url(url, dir, sizeof(dir), err, sizeof(err));
	json_decref(j);
	if (!r)
		r = route_check_snapshot_dir(vmm, vmm->allowed_dir, dir, true, err, sizeof(err));
	if (r) {
		api_response_error(resp, 400, "vm.snapshot: %s", err);
		return;
	}
	cfg = api_config_to_json_ch(vmm->ops->get_config(vmm->vm), vmm->extra);
	config = cfg ? json_dumps(cfg, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	json_decref(cfg);
	if (!config) {
		api_response_error(resp, 500, "vm.snapshot: cannot encode the config");
		return;
	}
	dirfd = fsutil_open_dir(vmm->allowed_dir, "snapshot directory", dir, err, sizeof(err));
	r = dirfd < 0 ? -EINVAL
		      : vmm->ops->snapshot(vmm->vm, dirfd, dir, config, strlen(config), &st, err,
					   sizeof(err));
	if (dirfd >= 0)
		close(dirfd);
	free(config);
	if (r) {
		/* a VM lvmm cannot save is the request's fault, not the server's */
		api_response_error(resp, r == -EOPNOTSUPP ? 400 : route_errno_status(r),
				   "vm.snapshot: %s", *err ? err : strerror(-r));
		return;
	}
	resp->status = 204;
}

static void route_vm_restore(struct api_vmm *vmm, const struct api_request *req,
			     struct api_response *resp)
{
	char err[API_ERR_LEN] = "", dir[CONFIG_PATH_MAX];
	const char *url = NULL, *mode = NULL;
	int resume = 0, prefault = 0, mem;
	json_t *j, *extra = NULL;
	struct vm *vm = NULL;
	int r;

	if (vmm->vm) {
		api_response_error(resp, 409,
				   "vm.restore: a VM already exists (state %s); restore into an "
				   "lvmm without one",
				   vm_state_name(vmm->ops->get_state(vmm->vm)));
		return;
	}
	if (!vmm->ops->restore) {
		api_response_error(resp, 501, "vm.restore: not implemented here");
		return;
	}
	j = route_load_body(req, resp);
	if (!j)
		return;
	if (json_unpack(j, "{s:s, s?b, s?b, s?s}", "source_url", &url, "resume", &resume,
			"prefault", &prefault, "memory_restore_mode", &mode)) {
		api_response_error(resp, 400,
				   "vm.restore: source_url (a string) is required; resume and "
				   "prefault are booleans, memory_restore_mode a string");
		json_decref(j);
		return;
	}
	r = api_snapshot_url(url, dir, sizeof(dir), err, sizeof(err));
	if (!r && mode && api_mem_restore_mode(mode) < 0) {
		snprintf(err, sizeof(err),
			 "memory_restore_mode %.32s: Copy or OnDemand (absent: mapped when the "
			 "devices allow, else copied)",
			 mode);
		r = -EINVAL;
	}
	mem = mode && !r ? api_mem_restore_mode(mode) : CONFIG_MEM_RESTORE_AUTO;
	json_decref(j);
	if (r) {
		api_response_error(resp, 400, "vm.restore: %s", err);
		return;
	}
	/* prefault: a copy faults every saved page in anyway, a mapping reads them in */
	r = api_restore_vm(vmm->ops, vmm->allowed_dir, dir, mem, prefault, &vm, &extra, err,
			   sizeof(err));
	if (r) {
		api_response_error(resp, r == -EOPNOTSUPP ? 400 : route_errno_status(r),
				   "vm.restore: %s", *err ? err : strerror(-r));
		return;
	}
	vmm->vm = vm;
	vmm->vm_owned = true;
	json_decref(vmm->extra);
	vmm->extra = extra;
	r = api_vmm_watch(vmm);
	if (r) {
		api_vmm_unwatch(vmm);
		api_response_error(resp, 500, "vm.restore: cannot start the VM waiter thread: %s",
				   strerror(-r));
		return;
	}
	if (resume) {
		r = vmm->ops->resume(vm, err, sizeof(err));
		if (r) {
			route_op_error(resp, "vm.restore: resume", r, err);
			return;
		}
	}
	resp->status = 204;
}

/* ---- live migration (docs/snapshot.md) ---- */

/* The migration socket's path from a unix:PATH URL, checked against the allowed directory. */
static int route_migration_path(struct api_vmm *vmm, const char *url, bool create, char *path,
				size_t len, char *err, unsigned errlen)
{
	int r = vm_migrate_url(url, path, len, err, errlen);

	if (!r && vmm->ops->check_path && vmm->allowed_dir && vmm->allowed_dir[0])
		r = vmm->ops->check_path(vmm->allowed_dir, "migration socket", path, create,
					 FSUTIL_SOCKET, err, errlen);
	return r;
}

static void route_vm_send_migration(struct api_vmm *vmm, const struct api_request *req,
				    struct api_response *resp)
{
	char err[API_ERR_LEN] = "", path[CONFIG_PATH_MAX];
	struct vm_migrate_stats st;
	const char *url = NULL;
	int local = 0, r;
	char *config = NULL;
	json_t *j, *cfg;

	if (!route_need_state(vmm, resp, "vm.send-migration", ST(VM_RUNNING) | ST(VM_PAUSED)))
		return;
	if (!vmm->ops->migrate_send) {
		api_response_error(resp, 501, "vm.send-migration: not implemented here");
		return;
	}
	j = route_load_body(req, resp);
	if (!j)
		return;
	if (json_unpack(j, "{s:s, s?b}", "destination_url", &url, "local", &local) || !url) {
		api_response_error(resp, 400,
				   "vm.send-migration: destination_url (a string) is required; "
				   "local is a boolean");
		json_decref(j);
		return;
	}
	r = route_migration_path(vmm, url, false, path, sizeof(path), err, sizeof(err));
	json_decref(j);
	if (r) {
		api_response_error(resp, 400, "vm.send-migration: %s", err);
		return;
	}
	cfg = api_config_to_json_ch(vmm->ops->get_config(vmm->vm), vmm->extra);
	config = cfg ? json_dumps(cfg, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	json_decref(cfg);
	if (!config) {
		api_response_error(resp, 500, "vm.send-migration: cannot encode the config");
		return;
	}
	r = vmm->ops->migrate_send(vmm->vm, path, local, config, strlen(config), &st, err,
				   sizeof(err));
	free(config);
	if (r) {
		api_response_error(resp, r == -EOPNOTSUPP ? 400 : route_errno_status(r),
				   "vm.send-migration: %s", *err ? err : strerror(-r));
		return;
	}
	fprintf(stderr,
		"lvmm: migrated to %s%s: %u pre-copy rounds, %llu pages (%llu MiB), %llu pages "
		"while paused, %llu bytes of state, %u host fds handed over, paused for %llu ms\n",
		path, st.local ? " (local)" : "", st.rounds, (unsigned long long)st.pages,
		(unsigned long long)(st.bytes >> 20), (unsigned long long)st.final_pages,
		(unsigned long long)st.state_bytes, st.fds,
		(unsigned long long)((st.resumed_at - st.paused_at) / 1000));
	/* cloud-hypervisor's source exits once the destination took over: the VM stays paused
	 * until it goes with this process */
	if (vmm->vm_external) {
		enum vm_state s = vmm->ops->get_state(vmm->vm);

		if (s == VM_RUNNING || s == VM_PAUSED)
			vmm->ops->shutdown(vmm->vm, err, sizeof(err));
	}
	vmm->shutdown = true;
	resp->status = 204;
}

struct route_mig_ctx {
	struct api_vmm *vmm;
	json_t *extra;
};

/* The source's config JSON as vm.create takes it, with vm.create's path checks. */
static int route_mig_config(void *ctx, const char *json, size_t len, struct vm_config *cfg,
			    char *err, unsigned errlen)
{
	struct route_mig_ctx *c = ctx;
	json_error_t jerr;
	json_t *j = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	int r;

	if (!j) {
		snprintf(err, errlen, "the source's config: malformed JSON at line %d: %s",
			 jerr.line, jerr.text);
		return -EINVAL;
	}
	json_decref(c->extra);
	c->extra = NULL;
	r = api_json_to_config_ch(j, c->vmm->ops, cfg, &c->extra, err, errlen);
	json_decref(j);
	if (!r && route_check_paths(c->vmm, cfg, err, errlen))
		r = -EINVAL;
	if (!r)
		snprintf(cfg->allowed_dir, sizeof(cfg->allowed_dir), "%s",
			 c->vmm->allowed_dir ? c->vmm->allowed_dir : "");
	return r ? -EINVAL : 0;
}

static void route_vm_receive_migration(struct api_vmm *vmm, const struct api_request *req,
				       struct api_response *resp)
{
	char err[API_ERR_LEN] = "", path[CONFIG_PATH_MAX];
	struct route_mig_ctx ctx = {.vmm = vmm};
	struct vm_migrate_stats st;
	const char *url = NULL;
	struct vm *vm = NULL;
	json_t *j;
	int r;

	if (vmm->vm) {
		api_response_error(resp, 409,
				   "vm.receive-migration: a VM already exists (state %s); receive "
				   "into an lvmm without one",
				   vm_state_name(vmm->ops->get_state(vmm->vm)));
		return;
	}
	if (!vmm->ops->migrate_receive) {
		api_response_error(resp, 501, "vm.receive-migration: not implemented here");
		return;
	}
	j = route_load_body(req, resp);
	if (!j)
		return;
	if (json_unpack(j, "{s:s}", "receiver_url", &url) || !url) {
		api_response_error(resp, 400,
				   "vm.receive-migration: receiver_url (a string) is required");
		json_decref(j);
		return;
	}
	r = route_migration_path(vmm, url, true, path, sizeof(path), err, sizeof(err));
	json_decref(j);
	if (r) {
		api_response_error(resp, 400, "vm.receive-migration: %s", err);
		return;
	}
	/* as cloud-hypervisor: the answer comes once the VM arrived (or the migration failed) */
	r = vmm->ops->migrate_receive(path, route_mig_config, &ctx, &vm, &st, err, sizeof(err));
	if (r) {
		json_decref(ctx.extra);
		api_response_error(resp,
				   r == -EPROTO || r == -ECANCELED ? 400 : route_errno_status(r),
				   "vm.receive-migration: %s", *err ? err : strerror(-r));
		return;
	}
	fprintf(stderr, "lvmm: received a VM at %s%s: %llu MiB of RAM pages, %s\n", path,
		st.local ? " (local, RAM memfd)" : "", (unsigned long long)(st.bytes >> 20),
		vmm->ops->get_state(vm) == VM_RUNNING ? "running" : "paused");
	vmm->vm = vm;
	vmm->vm_owned = true;
	json_decref(vmm->extra);
	vmm->extra = ctx.extra;
	r = api_vmm_watch(vmm);
	if (r) {
		api_vmm_unwatch(vmm);
		api_response_error(resp, 500,
				   "vm.receive-migration: cannot start the VM waiter thread: %s",
				   strerror(-r));
		return;
	}
	resp->status = 204;
}

/* Endpoints of cloud-hypervisor's API that lvmm does not implement: after the same state
 * check cloud-hypervisor makes (404 without a VM), 501 naming what is missing. */
struct route_missing {
	const char *name;
	const char *why;
};

static const struct route_missing route_missing[] = {
    {"vm.power-button", "lvmm has no ACPI power button (use vm.shutdown)"},
    {"vm.resize-disk", "lvmm cannot resize a disk"},
    {"vm.resize-zone", "lvmm has no memory zones"},
    {"vm.add-device", "lvmm has no VFIO passthrough"},
    {"vm.add-generic-vhost-user", "lvmm has no vhost-user devices"},
    {"vm.add-pmem", "lvmm has no virtio-pmem"},
    {"vm.add-vdpa", "lvmm has no vDPA devices"},
    {"vm.add-user-device", "lvmm has no vfio-user devices"},
    {"vm.coredump", "lvmm cannot write guest core dumps"},
    {"vm.nmi", "lvmm cannot inject an NMI through the API"},
};

static bool route_not_implemented(struct api_vmm *vmm, const char *name,
				  const struct api_request *req, struct api_response *resp)
{
	size_t i;

	for (i = 0; i < sizeof(route_missing) / sizeof(route_missing[0]); i++)
		if (!strcmp(route_missing[i].name, name))
			break;
	if (i == sizeof(route_missing) / sizeof(route_missing[0]))
		return false;
	resp->allow = NULL;
	if (req->method != HTTP_PUT) {
		api_response_error(resp, 400, "%s takes PUT, not %s", name,
				   http_method_str(req->method));
		resp->allow = "PUT";
		return true;
	}
	/* vm.restore and vm.receive-migration create a VM: they need none */
	if (strcmp(name, "vm.restore") && strcmp(name, "vm.receive-migration") &&
	    !route_need_state(vmm, resp, name, ST_ANY))
		return true;
	api_response_error(resp, 501, "%s: not implemented: %s", name, route_missing[i].why);
	return true;
}

static const struct route routes[] = {
    {"vmm.ping", HTTP_GET, false, route_vmm_ping},
    {"vmm.shutdown", HTTP_PUT, false, route_vmm_shutdown},
    {"vm.create", HTTP_PUT, true, route_vm_create},
    {"vm.boot", HTTP_PUT, false, route_vm_boot},
    {"vm.info", HTTP_GET, false, route_vm_info},
    {"vm.pause", HTTP_PUT, false, route_vm_pause},
    {"vm.resume", HTTP_PUT, false, route_vm_resume},
    {"vm.shutdown", HTTP_PUT, false, route_vm_shutdown},
    {"vm.reboot", HTTP_PUT, false, route_vm_reboot},
    {"vm.delete", HTTP_PUT, false, route_vm_delete},
    {"vm.counters", HTTP_GET, false, route_vm_counters},
    {"vm.add-vnvme", HTTP_PUT, true, route_vm_add_vnvme},
    {"vm.add-disk", HTTP_PUT, true, route_vm_add_disk},
    {"vm.add-vsock", HTTP_PUT, true, route_vm_add_vsock},
    {"vm.add-net", HTTP_PUT, true, route_vm_add_net},
    {"vm.add-fs", HTTP_PUT, true, route_vm_add_fs},
    {"vm.add-device", HTTP_PUT, true, route_vm_add_device},
    {"vm.remove-device", HTTP_PUT, true, route_vm_remove_device},
    {"vm.resize", HTTP_PUT, true, route_vm_resize},
    {"vm.snapshot", HTTP_PUT, true, route_vm_snapshot},
    {"vm.restore", HTTP_PUT, true, route_vm_restore},
    {"vm.send-migration", HTTP_PUT, true, route_vm_send_migration},
    {"vm.receive-migration", HTTP_PUT, true, route_vm_receive_migration},
};

void api_route(struct api_vmm *vmm, const struct api_request *req, struct api_response *resp)
{
	const char *name = req->path + strlen(API_PREFIX);
	size_t i;

	resp->status = 500;
	resp->body = NULL;
	resp->allow = NULL;
	if (strncmp(req->path, API_PREFIX, strlen(API_PREFIX))) {
		api_response_error(resp, 404, "unknown endpoint %.200s (endpoints are under %s)",
				   req->path, API_PREFIX);
		return;
	}
	for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		if (!strcmp(routes[i].name, name))
			break;
	if (i == sizeof(routes) / sizeof(routes[0])) {
		if (route_not_implemented(vmm, name, req, resp))
			return;
		api_response_error(resp, 404, "unknown endpoint %.200s", req->path);
		return;
	}
	/* cloud-hypervisor answers a verb an endpoint does not take with 400 */
	if (req->method != routes[i].method) {
		api_response_error(resp, 400, "%s takes %s, not %s", routes[i].name,
				   http_method_str(routes[i].method), http_method_str(req->method));
		resp->allow = http_method_str(routes[i].method);
		return;
	}
	if (routes[i].needs_body && !req->body_len) {
		api_response_error(resp, 400, "%s needs a JSON body", routes[i].name);
		return;
	}
	routes[i].fn(vmm, req, resp);
}
