/* `lvmm api --socket PATH VERB [JSON|@FILE|ARG]`: one HTTP request to a running lvmm's API
 * socket (like ch-remote), prints the JSON answer, exits non-zero on an error answer. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "api/api.h"
#include "api/api_internal.h"

#define CLIENT_TIMEOUT_S	   120 /* vm.create/boot load a kernel: allow slow disks */
#define CLIENT_MIGRATION_TIMEOUT_S 600
#define CLIENT_MAX_ANSWER	   (1 << 20)

enum client_body {
	BODY_NONE,
	BODY_JSON,
	BODY_VNVME,
	BODY_DISK,
	BODY_VSOCK,
	BODY_NET,
	BODY_FS,
	BODY_VFIO,
	BODY_DEVICE_ID,
	BODY_SNAPSHOT,
	BODY_RESTORE,
	BODY_SEND_MIGRATION,
	BODY_RECEIVE_MIGRATION
};

struct client_verb {
	const char *verb;
	const char *method;
	const char *endpoint;
	enum client_body body;
	const char *help;
};

static const struct client_verb client_verbs[] = {
    {"ping", "GET", "vmm.ping", BODY_NONE, "VMM version"},
    {"info", "GET", "vm.info", BODY_NONE, "VM config, state and memory size"},
    {"counters", "GET", "vm.counters", BODY_NONE, "per-device I/O and exit counters"},
    {"create", "PUT", "vm.create", BODY_JSON, "create a VM from a VmConfig JSON"},
    {"boot", "PUT", "vm.boot", BODY_NONE, "boot the created VM"},
    {"pause", "PUT", "vm.pause", BODY_NONE, "stop all vCPUs"},
    {"resume", "PUT", "vm.resume", BODY_NONE, "continue a paused VM"},
    {"shutdown", "PUT", "vm.shutdown", BODY_NONE, "stop the VM (state Shutdown)"},
    {"reboot", "PUT", "vm.reboot", BODY_NONE, "reset the VM"},
    {"delete", "PUT", "vm.delete", BODY_NONE, "shut down and forget the VM"},
    {"resize", "PUT", "vm.resize", BODY_JSON, "VmResize JSON (desired_vcpus, desired_ram)"},
    {"add-vnvme", "PUT", "vm.add-vnvme", BODY_VNVME, "hot-add a vNVMe (JSON or --vnvme syntax)"},
    {"add-disk", "PUT", "vm.add-disk", BODY_DISK,
     "hot-add a virtio-blk disk (JSON or --disk syntax)"},
    {"add-fs", "PUT", "vm.add-fs", BODY_FS, "hot-add a virtio-fs share (JSON or --fs syntax)"},
    {"add-vsock", "PUT", "vm.add-vsock", BODY_VSOCK,
     "hot-add the vsock device (JSON or --vsock syntax)"},
    {"add-net", "PUT", "vm.add-net", BODY_NET,
     "hot-add virtio-net (JSON or --net syntax; taps passed as fds)"},
    {"add-device", "PUT", "vm.add-device", BODY_VFIO,
     "pass a host PCI function through (JSON or --device syntax)"},
    {"remove-device", "PUT", "vm.remove-device", BODY_DEVICE_ID, "hot-remove a device by id"},
    {"snapshot", "PUT", "vm.snapshot", BODY_SNAPSHOT,
     "save the paused VM into a directory (file:///DIR or /DIR)"},
    {"restore", "PUT", "vm.restore", BODY_RESTORE,
     "restore a snapshot: source_url=file:///DIR[,resume=on][,prefault=on]"
     "[,memory_restore_mode=copy|ondemand] or /DIR"},
    {"send-migration", "PUT", "vm.send-migration", BODY_SEND_MIGRATION,
     "migrate the VM to a receiving lvmm: unix:PATH [--local]; lvmm exits after"},
    {"receive-migration", "PUT", "vm.receive-migration", BODY_RECEIVE_MIGRATION,
     "wait at unix:PATH for a migrating VM; answers once it arrived"},
    {"shutdown-vmm", "PUT", "vmm.shutdown", BODY_NONE, "stop lvmm itself"},
};

static void client_usage(FILE *f)
{
	fprintf(f, "usage: lvmm api --socket PATH VERB [JSON|@FILE|ARG]\n\n"
		   "Sends one request to the REST API of `lvmm run --api-socket PATH` and prints\n"
		   "the JSON answer. Exits 1 on an error answer or when the socket is absent.\n\n"
		   "verbs:\n");
	for (size_t i = 0; i < sizeof(client_verbs) / sizeof(client_verbs[0]); i++)
		fprintf(f, "  %-14s %-4s /api/v1/%-17s %s\n", client_verbs[i].verb,
			client_verbs[i].method, client_verbs[i].endpoint, client_verbs[i].help);
	fprintf(f, "\nexamples:\n"
		   "  lvmm api --socket vm.sock create @vm.json\n"
		   "  lvmm api --socket vm.sock add-vnvme file=disk.img,size=1G\n"
		   "  lvmm api --socket vm.sock add-disk path=data.img,readonly=on\n"
		   "  lvmm api --socket vm.sock add-net tap=tap0,mac=52:54:00:12:34:56\n"
		   "  lvmm api --socket vm.sock --fd 3 add-net '{\"fds\": [3]}' 3<>...\n"
		   "  lvmm api --socket vm.sock remove-device nvme1\n"
		   "  lvmm api --socket dst.sock receive-migration unix:/tmp/mig.sock &\n"
		   "  lvmm api --socket src.sock send-migration unix:/tmp/mig.sock [--local]\n\n"
		   "add-net opens a tap=NAME itself and hands its fds over the socket\n"
		   "(SCM_RIGHTS), one per queue pair; --fd N (repeatable) sends the caller's fd N\n"
		   "with any request, as fd=N in the --net syntax does.\n");
}

static char *client_read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f) {
		fprintf(stderr, "lvmm api: cannot read %s: %s\n", path, strerror(errno));
		return NULL;
	}
	do {
		if (len + 4096 + 1 > cap) {
			char *nb;

			cap = cap ? cap * 2 : 8192;
			nb = realloc(buf, cap);
			if (!nb || cap > 16 * API_MAX_BODY) {
				fprintf(stderr, "lvmm api: %s: too large\n", path);
				free(nb ? nb : buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, 4096, f);
		len += n;
	} while (n > 0);
	fclose(f);
	buf[len] = 0;
	return buf;
}

/* send-migration --local: the RAM memfd goes over the socket instead of its pages */
static bool client_local;

/* Turns the verb's argument into the request body; NULL (with a message) on a bad argument. */
/* fds sent with the request (SCM_RIGHTS): --fd N, or the taps add-net opened */
static int client_fds[API_MAX_FDS];
static unsigned client_nfds;

/* snapshot's and restore's argument: a URL, a plain absolute directory, or for restore
 * source_url=URL[,resume=on|off][,prefault=on|off][,memory_restore_mode=copy|ondemand] as
 * `lvmm run --restore` takes it. */
static json_t *client_snapshot_body(const struct client_verb *v, const char *arg)
{
	char buf[CONFIG_PATH_MAX + 64], url[CONFIG_PATH_MAX + 16], *tok, *save = NULL;
	bool resume = false, prefault = false;
	const char *mode = NULL;
	json_t *body;

	if (strlen(arg) >= sizeof(buf)) {
		fprintf(stderr, "lvmm api: %s: argument too long\n", v->verb);
		return NULL;
	}
	snprintf(buf, sizeof(buf), "%s", arg);
	url[0] = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		const char *u = !strncmp(tok, "source_url=", 11) ? tok + 11 : tok;

		if (v->body == BODY_RESTORE && !strcmp(tok, "resume=on"))
			resume = true;
		else if (v->body == BODY_RESTORE &&
			 (!strcmp(tok, "resume=off") || !strcmp(tok, "prefault=off")))
			continue;
		else if (v->body == BODY_RESTORE && !strcmp(tok, "prefault=on"))
			prefault = true;
		else if (v->body == BODY_RESTORE && !strncmp(tok, "memory_restore_mode=", 20))
			mode = !strcasecmp(tok + 20, "ondemand") ? "OnDemand"
			       : !strcasecmp(tok + 20, "copy")	 ? "Copy"
								 : tok + 20;
		else if (u[0] == '/')
			snprintf(url, sizeof(url), "file://%s", u);
		else if (!strncmp(u, "file://", 7))
			snprintf(url, sizeof(url), "%s", u);
		else {
			fprintf(stderr, "lvmm api: %s: '%s' is not file:///DIR or /DIR\n", v->verb,
				tok);
			return NULL;
		}
	}
	if (!url[0]) {
		fprintf(stderr, "lvmm api: %s: no directory given\n", v->verb);
		return NULL;
	}
	if (v->body == BODY_SNAPSHOT)
		return json_pack("{s:s}", "destination_url", url);
	body =
	    json_pack("{s:s, s:b, s:b}", "source_url", url, "resume", resume, "prefault", prefault);
	if (body && mode)
		json_object_set_new(body, "memory_restore_mode", json_string(mode));
	return body;
}

static char *client_body(const struct client_verb *v, const char *arg)
{
	char err[API_ERR_LEN] = "";
	json_t *j = NULL;
	char *s;

	if (v->body == BODY_NONE) {
		if (arg)
			fprintf(stderr, "lvmm api: %s takes no argument\n", v->verb);
		return arg ? NULL : strdup("");
	}
	if (!arg) {
		fprintf(stderr, "lvmm api: %s needs an argument (JSON, @FILE%s)\n", v->verb,
			v->body == BODY_VNVME	    ? " or file=PATH,..."
			: v->body == BODY_DISK	    ? " or path=IMG,..."
			: v->body == BODY_VSOCK	    ? " or cid=N,socket=PATH"
			: v->body == BODY_NET	    ? " or tap=NAME,..."
			: v->body == BODY_FS	    ? " or tag=TAG,socket=PATH,.."
			: v->body == BODY_VFIO	    ? " or path=/sys/bus/pci/devices/BDF[,id=ID]"
			: v->body == BODY_DEVICE_ID ? " or a device id"
			: v->body == BODY_SNAPSHOT  ? " or file:///DIR"
			: v->body == BODY_RESTORE   ? " or source_url=file:///DIR[,resume=on]"
			: v->body == BODY_SEND_MIGRATION || v->body == BODY_RECEIVE_MIGRATION
			    ? ": unix:PATH"
			    : "");
		return NULL;
	}
	if (arg[0] == '@')
		return client_read_file(arg + 1);
	if (arg[0] == '{' || v->body == BODY_JSON)
		return strdup(arg);
	if (v->body == BODY_VNVME) {
		struct vnvme_config *c = calloc(1, sizeof(*c));

		if (!c)
			return NULL;
		if (config_parse_vnvme(arg, c, err, sizeof(err)) == 0)
			j = api_vnvme_to_json(c);
		else
			fprintf(stderr, "lvmm api: %s\n", err);
		free(c);
	} else if (v->body == BODY_FS) {
		struct virtio_fs_config c;

		if (config_parse_fs(arg, &c, err, sizeof(err)) == 0) {
			j = api_fs_to_json(&c, 0);
			if (j && !c.id[0])
				json_object_del(j, "id"); /* the VM picks the first free fs<N> */
		} else {
			fprintf(stderr, "lvmm api: %s\n", err);
		}
	} else if (v->body == BODY_VFIO) {
		struct vfio_pci_config c;

		if (config_parse_device(arg, &c, err, sizeof(err)) == 0) {
			j = api_device_to_json(&c, 0);
			if (j && !c.id[0])
				json_object_del(j, "id"); /* the VM picks the first free dev<N> */
		} else {
			fprintf(stderr, "lvmm api: %s\n", err);
		}
	} else if (v->body == BODY_VSOCK) {
		struct virtio_vsock_config c;

		if (config_parse_vsock(arg, &c, err, sizeof(err)) == 0)
			j = api_vsock_to_json(&c);
		else
			fprintf(stderr, "lvmm api: %s\n", err);
	} else if (v->body == BODY_NET) {
		/* tap=NAME: the tap is opened here, with the caller's privileges, and handed over
		 * (lvmm itself may sit in a jail without /dev/net/tun); fd=N: the caller's fds */
		struct virtio_net_config c;

		if (config_parse_net(arg, &c, err, sizeof(err))) {
			fprintf(stderr, "lvmm api: %s\n", err);
			return NULL;
		}
		if (!c.nfds) {
			unsigned pairs = c.num_queues ? c.num_queues / 2 : 1;

			if (virtio_net_tap_open(c.tap, pairs, c.fds, err, sizeof(err)) ||
			    (c.host_ip && virtio_net_tap_addr(c.tap, c.host_ip, c.host_mask, err,
							      sizeof(err)))) {
				fprintf(stderr, "lvmm api: %s\n", err);
				return NULL;
			}
			c.nfds = pairs;
		}
		for (unsigned i = 0; i < c.nfds && client_nfds < API_MAX_FDS; i++)
			client_fds[client_nfds++] = c.fds[i];
		j = api_net_to_json(&c, 0);
		if (j && !c.id[0])
			json_object_del(j, "id");
		if (j) {
			json_t *a = json_array();

			for (unsigned i = 0; a && i < c.nfds; i++)
				json_array_append_new(a, json_integer(c.fds[i]));
			json_object_set_new(j, "fds", a ? a : json_null());
		}
	} else if (v->body == BODY_DISK) {
		struct virtio_blk_config *c = calloc(1, sizeof(*c));

		if (!c)
			return NULL;
		if (config_parse_disk(arg, c, err, sizeof(err)) == 0)
			j = api_disk_to_json(c);
		else
			fprintf(stderr, "lvmm api: %s\n", err);
		free(c);
	} else if (v->body == BODY_SNAPSHOT || v->body == BODY_RESTORE) {
		j = client_snapshot_body(v, arg);
	} else if (v->body == BODY_SEND_MIGRATION) {
		j = json_pack("{s:s, s:b}", "destination_url", arg, "local", client_local);
	} else if (v->body == BODY_RECEIVE_MIGRATION) {
		j = json_pack("{s:s}", "receiver_url", arg);
	} else {
		j = json_pack("{s:s}", "id", arg);
	}
	if (!j)
		return NULL;
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

static bool client_long; /* a migration verb */

static int client_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	/* a migration's answer comes once the VM moved: the destination waits for its source */
	struct timeval tv = {.tv_sec = client_long ? CLIENT_MIGRATION_TIMEOUT_S : CLIENT_TIMEOUT_S};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "lvmm api: socket path %s longer than %zu bytes\n", path,
			sizeof(sa.sun_path) - 1);
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "lvmm api: socket: %s\n", strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr,
			"lvmm api: cannot connect to %s: %s (is `lvmm run --api-socket %s` "
			"running?)\n",
			path, strerror(errno), path);
		close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

struct client_answer {
	char *body;
	size_t len;
	bool done;
	bool too_big;
};

static int client_on_body(http_parser *p, const char *at, size_t len)
{
	struct client_answer *a = p->data;
	char *nb;

	if (a->len + len > CLIENT_MAX_ANSWER) {
		a->too_big = true;
		return -1;
	}
	nb = realloc(a->body, a->len + len + 1);
	if (!nb)
		return -1;
	a->body = nb;
	memcpy(a->body + a->len, at, len);
	a->len += len;
	a->body[a->len] = 0;
	return 0;
}

static int client_on_complete(http_parser *p)
{
	((struct client_answer *)p->data)->done = true;
	return 0;
}

static bool client_send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		union {
			struct cmsghdr align;
			char b[CMSG_SPACE(API_MAX_FDS * sizeof(int))];
		} ctl;
		struct iovec iov = {(void *)buf, len};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
		ssize_t n;

		if (client_nfds) {
			/* the fds ride on the request's first bytes */
			struct cmsghdr *cm;

			memset(&ctl, 0, sizeof(ctl));
			m.msg_control = ctl.b;
			m.msg_controllen = CMSG_SPACE(client_nfds * sizeof(int));
			cm = CMSG_FIRSTHDR(&m);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(client_nfds * sizeof(int));
			memcpy(CMSG_DATA(cm), client_fds, client_nfds * sizeof(int));
		}
		n = sendmsg(fd, &m, MSG_NOSIGNAL);
		if (n > 0)
			client_nfds = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		buf += n;
		len -= n;
	}
	return true;
}

/* Prints the answer; JSON is re-indented for people, anything else is shown as is. */
static void client_print(FILE *f, const char *body)
{
	json_t *j = json_loads(body, 0, NULL);
	char *s = j ? json_dumps(j, JSON_INDENT(2)) : NULL;

	fprintf(f, "%s\n", s ? s : body);
	free(s);
	json_decref(j);
}

static int client_request(const char *path, const struct client_verb *v, const char *body)
{
	static const http_parser_settings settings = {
	    .on_body = client_on_body,
	    .on_message_complete = client_on_complete,
	};
	struct client_answer a = {0};
	http_parser p;
	char head[512], buf[4096];
	int fd, n, status = 1;
	size_t blen = strlen(body);

	fd = client_connect(path);
	if (fd < 0)
		return 1;
	n = snprintf(head, sizeof(head),
		     "%s /api/v1/%s HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n"
		     "Connection: close\r\n%sContent-Length: %zu\r\n\r\n",
		     v->method, v->endpoint, blen ? "Content-Type: application/json\r\n" : "",
		     blen);
	if (!client_send_all(fd, head, n) || !client_send_all(fd, body, blen)) {
		fprintf(stderr, "lvmm api: %s: sending the request to %s: %s\n", v->verb, path,
			strerror(errno));
		close(fd);
		return 1;
	}
	http_parser_init(&p, HTTP_RESPONSE);
	p.data = &a;
	while (!a.done) {
		ssize_t r = recv(fd, buf, sizeof(buf), 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "lvmm api: %s: no answer from %s: %s\n", v->verb, path,
				strerror(errno));
			goto out;
		}
		if ((size_t)http_parser_execute(&p, &settings, buf, r) != (size_t)r ||
		    HTTP_PARSER_ERRNO(&p) != HPE_OK) {
			fprintf(stderr, "lvmm api: %s: bad answer from %s: %s\n", v->verb, path,
				a.too_big ? "body over 1 MiB"
					  : http_errno_description(HTTP_PARSER_ERRNO(&p)));
			goto out;
		}
		if (r == 0)
			break;
	}
	if (!a.done) {
		fprintf(stderr, "lvmm api: %s: %s closed the connection mid-answer\n", v->verb,
			path);
		goto out;
	}
	if (p.status_code >= 200 && p.status_code < 300) {
		if (a.len)
			client_print(stdout, a.body);
		status = 0;
	} else {
		json_t *j = a.len ? json_loads(a.body, 0, NULL) : NULL;
		/* cloud-hypervisor's shape, a list of messages; {"error": ...} from older lvmm */
		const char *msg = json_is_array(j) ? json_string_value(json_array_get(j, 0))
						   : json_string_value(json_object_get(j, "error"));

		fprintf(stderr, "lvmm api: %s: HTTP %u: %s\n", v->verb, p.status_code,
			msg ? msg : (a.len ? a.body : "(no body)"));
		json_decref(j);
	}
out:
	free(a.body);
	close(fd);
	return status;
}

int api_client_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"api-socket", required_argument, NULL, 's'}, /* ch-remote's spelling */
	    {"fd", required_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},
	    {"local", no_argument, NULL, 'l'},
	    {0},
	};
	const char *sock = NULL;
	const struct client_verb *v = NULL;
	char *body;
	int c, r;

	optind = 1;
	client_nfds = 0;
	client_local = false;
	/* options anywhere: send-migration unix:PATH --local */
	while ((c = getopt_long(argc, argv, "s:f:h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			client_local = true;
			break;
		case 's':
			sock = optarg;
			break;
		case 'f': {
			unsigned fd;

			if (config_parse_count(optarg, 0, 1 << 20, &fd) ||
			    client_nfds == API_MAX_FDS) {
				fprintf(stderr, "lvmm api: --fd %s: an open fd (at most %d)\n",
					optarg, API_MAX_FDS);
				return 2;
			}
			client_fds[client_nfds++] = (int)fd;
			break;
		}
		case 'h':
			client_usage(stdout);
			return 0;
		default:
			client_usage(stderr);
			return 2;
		}
	}
	if (!sock || optind >= argc || argc - optind > 2) {
		fprintf(stderr, "lvmm api: %s\n",
			!sock		 ? "--socket PATH is required"
			: optind >= argc ? "a VERB is required"
					 : "too many arguments");
		client_usage(stderr);
		return 2;
	}
	for (size_t i = 0; i < sizeof(client_verbs) / sizeof(client_verbs[0]); i++)
		if (!strcmp(client_verbs[i].verb, argv[optind]))
			v = &client_verbs[i];
	if (!v) {
		fprintf(stderr, "lvmm api: unknown verb '%s'\n", argv[optind]);
		client_usage(stderr);
		return 2;
	}
	if (client_local && v->body != BODY_SEND_MIGRATION) {
		fprintf(stderr, "lvmm api: --local goes with send-migration only\n");
		return 2;
	}
	client_long = v->body == BODY_SEND_MIGRATION || v->body == BODY_RECEIVE_MIGRATION;
	body = client_body(v, optind + 1 < argc ? argv[optind + 1] : NULL);
	if (!body)
		return 2;
	r = client_request(sock, v, body);
	free(body);
	return r;
}
