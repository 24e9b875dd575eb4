/* VmConfig JSON <-> struct vm_config: every field of cloud-hypervisor's VmConfig schema is read;
 * what lvmm implements is mapped, a default is accepted, a request for a device or feature lvmm
 * lacks is refused naming the field; keys outside the schema are ignored (logged once). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/api_internal.h"

#define JSON_MAX_VCPUS 255

static int json_fail(char *err, unsigned errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int json_fail(char *err, unsigned errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int json_unsupported(char *err, unsigned errlen, const char *where, const char *key,
			    const char *lacks);

/* Rejects any key of obj not in keys (NULL-terminated): a typo must not be silently ignored. */
static int json_check_keys(const json_t *obj, const char *where, const char *const *keys, char *err,
			   unsigned errlen)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)obj, k, v)
	{
		const char *const *p;

		for (p = keys; *p; p++)
			if (!strcmp(*p, k))
				break;
		if (!*p)
			return json_fail(err, errlen, "unknown field '%s%s%s'", where,
					 *where ? "." : "", k);
	}
	return 0;
}

/* Absent and null both mean "keep the default". */
static const json_t *json_field(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);

	return json_is_null(v) ? NULL : v;
}

static int json_get_object(const json_t *obj, const char *key, const json_t **out, char *err,
			   unsigned errlen)
{
	const json_t *v = json_field(obj, key);

	*out = v;
	if (v && !json_is_object(v))
		return json_fail(err, errlen, "field '%s' must be an object", key);
	return 0;
}

static int json_get_u64(const json_t *obj, const char *where, const char *key, uint64_t min,
			uint64_t max, uint64_t *out, char *err, unsigned errlen)
{
	const json_t *v = json_field(obj, key);
	json_int_t i;

	if (!v)
		return 0;
	if (!json_is_integer(v))
		return json_fail(err, errlen, "field '%s.%s' must be an integer", where, key);
	i = json_integer_value(v);
	if (i < 0 || (uint64_t)i < min || (uint64_t)i > max)
		return json_fail(err, errlen, "field '%s.%s' value %lld out of range %llu..%llu",
				 where, key, (long long)i, (unsigned long long)min,
				 (unsigned long long)max);
	*out = (uint64_t)i;
	return 0;
}

static int json_get_str(const json_t *obj, const char *where, const char *key, char *buf,
			size_t size, char *err, unsigned errlen)
{
	const json_t *v = json_field(obj, key);
	size_t len;

	if (!v)
		return 0;
	if (!json_is_string(v))
		return json_fail(err, errlen, "field '%s.%s' must be a string", where, key);
	len = json_string_length(v);
	if (len >= size)
		return json_fail(err, errlen, "field '%s.%s' is %zu bytes long, max %zu", where,
				 key, len, size - 1);
	/* An embedded NUL would silently cut a path short. */
	if (memchr(json_string_value(v), 0, len))
		return json_fail(err, errlen, "field '%s.%s' contains a NUL byte", where, key);
	memcpy(buf, json_string_value(v), len + 1);
	return 0;
}

static int json_get_bool(const json_t *obj, const char *where, const char *key, bool *out,
			 char *err, unsigned errlen)
{
	const json_t *v = json_field(obj, key);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return json_fail(err, errlen, "field '%s.%s' must be true or false", where, key);
	*out = json_is_true(v);
	return 0;
}

const char *api_serial_mode_name(enum serial_mode m)
{
	switch (m) {
	case SERIAL_OFF:
		return "Off";
	case SERIAL_NULL:
		return "Null";
	case SERIAL_FILE:
		return "File";
	case SERIAL_STDIO:
	default:
		return "Tty";
	}
}

const char *api_vnvme_mode_name(enum vnvme_mode m)
{
	switch (m) {
	case VNVME_PASSTHROUGH:
		return "passthrough";
	case VNVME_ISOLATED:
		return "isolated";
	case VNVME_EMULATE:
	default:
		return "emulate";
	}
}

int api_json_to_vnvme(const json_t *obj, const char *where, struct vnvme_config *c, char *err,
		      unsigned errlen)
{
	static const char *const keys[] = {"id",	 "path",     "ssd",	    "vol",
					   "size",	 "readonly", "serial",	    "mode",
					   "num_queues", "doorbell", "pci_segment", NULL};
	uint64_t nq = 0, seg = 0;
	char mode[16] = "", db[16] = "";
	int r;

	memset(c, 0, sizeof(*c));
	if (!json_is_object(obj))
		return json_fail(err, errlen, "'%s' must be an object", where);
	r = json_check_keys(obj, where, keys, err, errlen);
	if (!r)
		r = json_get_str(obj, where, "id", c->id, sizeof(c->id), err, errlen);
	if (!r)
		r = json_get_str(obj, where, "path", c->path, sizeof(c->path), err, errlen);
	if (!r)
		r = json_get_str(obj, where, "ssd", c->ssd, sizeof(c->ssd), err, errlen);
	if (!r)
		r = json_get_str(obj, where, "vol", c->vol, sizeof(c->vol), err, errlen);
	if (!r)
		r = json_get_u64(obj, where, "size", 0, UINT64_MAX >> 1, &c->size, err, errlen);
	if (!r)
		r = json_get_bool(obj, where, "readonly", &c->readonly, err, errlen);
	if (!r)
		r = json_get_str(obj, where, "serial", c->serial, sizeof(c->serial), err, errlen);
	if (!r)
		r = json_get_str(obj, where, "mode", mode, sizeof(mode), err, errlen);
	if (!r) /* cloud-hypervisor's name; 0 or absent = one per vCPU */
		r = json_get_u64(obj, where, "num_queues", 0, 65535, &nq, err, errlen);
	if (!r)
		r = json_get_str(obj, where, "doorbell", db, sizeof(db), err, errlen);
	/* cloud-hypervisor's device field: segment 0 is where lvmm places every device */
	if (!r)
		r = json_get_u64(obj, where, "pci_segment", 0, API_MAX_PCI_SEGMENTS - 1, &seg, err,
				 errlen);
	if (!r && seg)
		r = json_unsupported(err, errlen, where, "pci_segment",
				     "lvmm places devices on PCI segment 0");
	if (r)
		return r;
	c->queues = (unsigned)nq;
	if (!*db || !strcmp(db, "auto"))
		c->doorbell = VNVME_DB_AUTO;
	else if (!strcmp(db, "poll"))
		c->doorbell = VNVME_DB_POLL;
	else if (!strcmp(db, "eventfd"))
		c->doorbell = VNVME_DB_EVENTFD;
	else
		return json_fail(err, errlen,
				 "field '%s.doorbell' value '%s' is not poll, eventfd or auto",
				 where, db);

	/* as on the command line: an ssd's guest is not trusted unless the operator says so */
	if (!*mode && *c->ssd)
		c->mode = VNVME_ISOLATED;
	else if (!*mode || !strcmp(mode, "emulate"))
		c->mode = VNVME_EMULATE;
	else if (!strcmp(mode, "passthrough"))
		c->mode = VNVME_PASSTHROUGH;
	else if (!strcmp(mode, "isolated"))
		c->mode = VNVME_ISOLATED;
	else
		return json_fail(
		    err, errlen,
		    "field '%s.mode' value '%s' is not emulate, passthrough or isolated", where,
		    mode);
	if (!*c->path == !*c->ssd)
		return json_fail(err, errlen, "'%s' needs exactly one of 'path' and 'ssd'", where);
	if (*c->vol && !*c->ssd)
		return json_fail(err, errlen, "field '%s.vol' needs 'ssd'", where);
	/* an SSD name becomes a socket or device path lvmm opens: a plain name, as on the
	 * command line, never a path of the client's choosing */
	if (*c->ssd && !config_vnvme_name_ok(c->ssd, strlen(c->ssd), CONFIG_SSD_NAME_MAX))
		return json_fail(err, errlen,
				 "field '%s.ssd' value '%s' is not an SSD name (1-%d characters "
				 "of [A-Za-z0-9_.-])",
				 where, c->ssd, CONFIG_SSD_NAME_MAX - 1);
	if (*c->vol && !config_vnvme_name_ok(c->vol, strlen(c->vol), CONFIG_SSD_NAME_MAX))
		return json_fail(err, errlen,
				 "field '%s.vol' value '%s' is not a volume name (1-%d characters "
				 "of [A-Za-z0-9_.-])",
				 where, c->vol, CONFIG_SSD_NAME_MAX - 1);
	return 0;
}

/* Keys outside cloud-hypervisor's schema are ignored as it ignores them; each distinct name is
 * logged once per process so an operator sees a typo without a flood. */
#define JSON_LOGGED_MAX 64
static char json_logged[JSON_LOGGED_MAX][48];
static unsigned json_nlogged;

static void json_ignore_key(const char *where, const char *k)
{
	char name[48];
	unsigned i;

	snprintf(name, sizeof(name), "%s%s%s", where, *where ? "." : "", k);
	/* a client's key never writes escapes or line breaks into the log */
	for (char *c = name; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
			*c = '?';
	for (i = 0; i < json_nlogged && i < JSON_LOGGED_MAX; i++)
		if (!strcmp(json_logged[i], name))
			return;
	if (json_nlogged > JSON_LOGGED_MAX)
		return;
	if (json_nlogged == JSON_LOGGED_MAX) {
		json_nlogged++;
		fprintf(stderr, "lvmm api: vm.create: more ignored fields, no longer logged\n");
		return;
	}
	snprintf(json_logged[json_nlogged++], sizeof(json_logged[0]), "%s", name);
	fprintf(stderr, "lvmm api: vm.create: ignoring field '%s' (not in the VmConfig schema)\n",
		name);
}

static void json_note_keys(const json_t *obj, const char *where, const char *const *keys)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)obj, k, v)
	{
		const char *const *p;

		for (p = keys; *p; p++)
			if (!strcmp(*p, k))
				break;
		if (!*p)
			json_ignore_key(where, k);
	}
}

/* What a field lvmm does not implement may hold and still ask for nothing. */
enum json_dflt {
	JD_FALSE,   /* absent, null or false */
	JD_EMPTY,   /* absent, null or [] */
	JD_ABSENT,  /* absent or null */
	JD_NOSTR,   /* absent, null or "" */
	JD_ZERO,    /* absent, null or 0 */
	JD_ANYBOOL, /* either boolean: lvmm has nothing to change for it */
	JD_ANYSTR,  /* any string: meaningless for what lvmm builds */
};

struct json_rule {
	const char *key;
	enum json_dflt d;
	const char *lacks; /* what lvmm does not have, for the refusal */
};

static int json_unsupported(char *err, unsigned errlen, const char *where, const char *key,
			    const char *lacks)
{
	return json_fail(err, errlen, "field '%s%s%s' is unsupported: %s", where, *where ? "." : "",
			 key, lacks);
}

static int json_check_rules(const json_t *obj, const char *where, const struct json_rule *rules,
			    char *err, unsigned errlen)
{
	const struct json_rule *p;

	for (p = rules; p->key; p++) {
		const json_t *v = json_field(obj, p->key);
		bool type_ok, dflt;

		if (!v)
			continue;
		switch (p->d) {
		case JD_FALSE:
		case JD_ANYBOOL:
			type_ok = json_is_boolean(v);
			dflt = p->d == JD_ANYBOOL || json_is_false(v);
			break;
		case JD_EMPTY:
			type_ok = json_is_array(v);
			dflt = type_ok && !json_array_size(v);
			break;
		case JD_NOSTR:
		case JD_ANYSTR:
			type_ok = json_is_string(v);
			dflt = type_ok && (p->d == JD_ANYSTR || !json_string_length(v));
			break;
		case JD_ZERO:
			type_ok = json_is_integer(v);
			dflt = type_ok && !json_integer_value(v);
			break;
		case JD_ABSENT:
		default:
			type_ok = true;
			dflt = false;
			break;
		}
		if (!type_ok)
			return json_fail(err, errlen, "field '%s%s%s' has the wrong type", where,
					 *where ? "." : "", p->key);
		if (!dflt)
			return json_unsupported(err, errlen, where, p->key, p->lacks);
	}
	return 0;
}

static void json_keys_of(const struct json_rule *rules, const char *const *extra, const char **out,
			 size_t max)
{
	size_t n = 0;

	for (; extra && *extra && n + 1 < max; extra++)
		out[n++] = *extra;
	for (; rules->key && n + 1 < max; rules++)
		out[n++] = rules->key;
	out[n] = NULL;
}

/* Fields and sub-objects the parser accepted beyond struct vm_config, kept for vm.info. */
static void json_keep(json_t *extra, const char *obj, const char *key, const json_t *v)
{
	json_t *o;

	if (!extra || !v)
		return;
	if (!obj) {
		json_object_set(extra, key, (json_t *)v);
		return;
	}
	o = json_object_get(extra, obj);
	if (!o) {
		o = json_object();
		json_object_set_new(extra, obj, o);
	}
	json_object_set(o, key, (json_t *)v);
}

static const struct json_rule json_cpus_rules[] = {
    {"kvm_hyperv", JD_FALSE, "lvmm has no Hyper-V enlightenments"},
    {"nested", JD_ANYBOOL, ""},
    {"affinity", JD_EMPTY, "lvmm does not pin vCPUs (pin the threads named vcpuN instead)"},
    {"max_phys_bits", JD_ABSENT, "lvmm reports the host's physical address width"},
    {NULL, 0, NULL},
};

static int json_to_topology(const json_t *o, char *err, unsigned errlen)
{
	static const char *const keys[] = {"threads_per_core", "cores_per_die", "dies_per_package",
					   "packages", NULL};
	uint64_t tpc = 1, dpp = 1, pk = 1, cpd = 1;
	int r;

	if (!json_is_object(o))
		return json_fail(err, errlen, "field 'cpus.topology' must be an object");
	json_note_keys(o, "cpus.topology", keys);
	r = json_get_u64(o, "cpus.topology", "threads_per_core", 1, 255, &tpc, err, errlen);
	if (!r)
		r = json_get_u64(o, "cpus.topology", "cores_per_die", 1, 255, &cpd, err, errlen);
	if (!r)
		r = json_get_u64(o, "cpus.topology", "dies_per_package", 1, 255, &dpp, err, errlen);
	if (!r)
		r = json_get_u64(o, "cpus.topology", "packages", 1, 255, &pk, err, errlen);
	if (r)
		return r;
	/* lvmm's MADT and CPUID describe one package of single-threaded cores */
	if (tpc != 1 || dpp != 1 || pk != 1)
		return json_unsupported(
		    err, errlen, "cpus", "topology",
		    "lvmm describes one package of single-threaded cores "
		    "(threads_per_core, dies_per_package and packages must be 1)");
	return 0;
}

static int json_to_cpus(const json_t *root, struct vm_config *cfg, json_t *extra, char *err,
			unsigned errlen)
{
	static const char *const mine[] = {"boot_vcpus", "max_vcpus",	    "topology",
					   "features",	 "core_scheduling", NULL};
	const char *keys[16];
	const json_t *o, *v;
	uint64_t boot = cfg->cpus, max = 0;
	int r;

	r = json_get_object(root, "cpus", &o, err, errlen);
	if (r || !o)
		return r;
	json_keys_of(json_cpus_rules, mine, keys, 16);
	json_note_keys(o, "cpus", keys);
	r = json_check_rules(o, "cpus", json_cpus_rules, err, errlen);
	if (!r)
		r = json_get_u64(o, "cpus", "boot_vcpus", 1, JSON_MAX_VCPUS, &boot, err, errlen);
	if (!r)
		r = json_get_u64(o, "cpus", "max_vcpus", 1, JSON_MAX_VCPUS, &max, err, errlen);
	if (r)
		return r;
	v = json_field(o, "topology");
	if (v) {
		r = json_to_topology(v, err, errlen);
		if (r)
			return r;
		json_keep(extra, "cpus", "topology", v);
	}
	v = json_field(o, "features");
	if (v) {
		if (!json_is_object(v))
			return json_fail(err, errlen, "field 'cpus.features' must be an object");
		if (json_field(v, "amx") && !json_is_false(json_field(v, "amx")))
			return json_unsupported(err, errlen, "cpus.features", "amx",
						"lvmm does not enable AMX state for guests");
	}
	v = json_field(o, "core_scheduling");
	if (v) {
		if (!json_is_string(v))
			return json_fail(err, errlen,
					 "field 'cpus.core_scheduling' must be a string");
		if (strcmp(json_string_value(v), "Vm") && strcmp(json_string_value(v), "Off"))
			return json_unsupported(err, errlen, "cpus", "core_scheduling",
						"lvmm has no per-vCPU core scheduling (Vm or Off)");
	}
	if (json_field(o, "nested"))
		json_keep(extra, "cpus", "nested", json_field(o, "nested"));
	if (!max)
		max = boot;
	if (max < boot)
		return json_fail(err, errlen,
				 "field 'cpus.max_vcpus' value %llu below boot_vcpus %llu",
				 (unsigned long long)max, (unsigned long long)boot);
	cfg->cpus = boot;
	cfg->max_cpus = max;
	return 0;
}

static const struct json_rule json_memory_rules[] = {
    {"hotplugged_size", JD_ZERO, "no memory is hot-plugged at creation"},
    {"mergeable", JD_FALSE, "lvmm does not mark guest RAM mergeable (KSM)"},
    {"shared", JD_ANYBOOL, ""}, /* guest RAM is a MAP_SHARED memfd either way */
    {"thp", JD_ANYBOOL, ""},	/* the memfd follows the host's shmem THP setting */
    {"hugepages", JD_FALSE, "lvmm backs guest RAM with a memfd of base pages"},
    {"hugepage_size", JD_ABSENT, "lvmm backs guest RAM with a memfd of base pages"},
    {"prefault", JD_FALSE, "lvmm does not prefault guest RAM"},
    {"reserve", JD_FALSE, "lvmm does not reserve guest RAM"},
    {"zones", JD_EMPTY, "lvmm has one memory region per VM (no memory zones)"},
    {NULL, 0, NULL},
};

static int json_to_memory(const json_t *root, struct vm_config *cfg, json_t *extra, char *err,
			  unsigned errlen)
{
	static const char *const mine[] = {"size", "hotplug_size", "hotplug_method", NULL};
	const char *keys[16];
	const json_t *o, *v;
	uint64_t hp = 0;
	int r;

	r = json_get_object(root, "memory", &o, err, errlen);
	if (r || !o)
		return r;
	json_keys_of(json_memory_rules, mine, keys, 16);
	json_note_keys(o, "memory", keys);
	r = json_check_rules(o, "memory", json_memory_rules, err, errlen);
	if (!r)
		r = json_get_u64(o, "memory", "size", 1, UINT64_MAX >> 1, &cfg->memory, err,
				 errlen);
	/* Kata always sends it. lvmm reserves no hotplug region (vm.resize refuses to grow
	 * RAM), so vm.info leaves it out and Kata's memory resize stays a no-op. */
	if (!r)
		r = json_get_u64(o, "memory", "hotplug_size", 0, UINT64_MAX >> 1, &hp, err, errlen);
	if (r)
		return r;
	v = json_field(o, "hotplug_method");
	if (v) {
		if (!json_is_string(v))
			return json_fail(err, errlen,
					 "field 'memory.hotplug_method' must be a string");
		if (strcmp(json_string_value(v), "Acpi"))
			return json_unsupported(err, errlen, "memory", "hotplug_method",
						"lvmm has no virtio-mem (only Acpi is accepted)");
	}
	for (const struct json_rule *p = json_memory_rules; p->key; p++)
		if (p->d == JD_ANYBOOL && json_field(o, p->key))
			json_keep(extra, "memory", p->key, json_field(o, p->key));
	return 0;
}

static int json_to_payload(const json_t *root, struct vm_config *cfg, char *err, unsigned errlen)
{
	static const struct json_rule rules[] = {
	    {"firmware", JD_NOSTR, "lvmm boots a kernel directly, without firmware"},
	    {"igvm", JD_NOSTR, "lvmm loads no IGVM files"},
	    {"host_data", JD_NOSTR, "lvmm has no confidential guests"},
	    {NULL, 0, NULL},
	};
	static const char *const mine[] = {"kernel", "initramfs", "cmdline", NULL};
	const char *keys[16];
	const json_t *o;
	int r;

	r = json_get_object(root, "payload", &o, err, errlen);
	if (r || !o)
		return r;
	json_keys_of(rules, mine, keys, 16);
	json_note_keys(o, "payload", keys);
	r = json_check_rules(o, "payload", rules, err, errlen);
	if (!r)
		r = json_get_str(o, "payload", "kernel", cfg->kernel, sizeof(cfg->kernel), err,
				 errlen);
	if (!r)
		r = json_get_str(o, "payload", "initramfs", cfg->initramfs, sizeof(cfg->initramfs),
				 err, errlen);
	if (!r)
		r = json_get_str(o, "payload", "cmdline", cfg->cmdline, sizeof(cfg->cmdline), err,
				 errlen);
	return r;
}

static int json_to_serial(const json_t *root, struct vm_config *cfg, char *err, unsigned errlen)
{
	static const char *const keys[] = {"mode", "file", "truncate", "limit", "socket", NULL};
	const json_t *o;
	char mode[8] = "";
	int r;

	r = json_get_object(root, "serial", &o, err, errlen);
	if (r || !o)
		return r;
	json_note_keys(o, "serial", keys);
	if (json_field(o, "socket"))
		return json_unsupported(err, errlen, "serial", "socket",
					"lvmm has no serial socket (modes Off, Null, Tty, File)");
	r = json_get_str(o, "serial", "mode", mode, sizeof(mode), err, errlen);
	if (!r)
		r = json_get_str(o, "serial", "file", cfg->serial_file, sizeof(cfg->serial_file),
				 err, errlen);
	if (!r)
		r = json_get_bool(o, "serial", "truncate", &cfg->serial_truncate, err, errlen);
	if (!r)
		r = json_get_u64(o, "serial", "limit", 0, UINT64_MAX >> 1, &cfg->serial_limit, err,
				 errlen);
	if (r)
		return r;
	if (!strcmp(mode, "Off"))
		cfg->serial = SERIAL_OFF;
	else if (!strcmp(mode, "Null"))
		cfg->serial = SERIAL_NULL;
	else if (!strcmp(mode, "Tty"))
		cfg->serial = SERIAL_STDIO;
	else if (!strcmp(mode, "File"))
		cfg->serial = SERIAL_FILE;
	else if (!strcmp(mode, "Pty") || !strcmp(mode, "Socket"))
		return json_fail(err, errlen,
				 "field 'serial.mode' value '%s' is unsupported: lvmm's serial "
				 "modes are Off, Null, Tty and File",
				 mode);
	else
		return json_fail(err, errlen,
				 "field 'serial.mode' value '%s' is not Off, Null, Tty or File",
				 mode);
	if (cfg->serial == SERIAL_FILE && !*cfg->serial_file)
		return json_fail(err, errlen, "serial mode File needs 'serial.file'");
	if (cfg->serial != SERIAL_FILE && *cfg->serial_file)
		return json_fail(err, errlen, "field 'serial.file' needs serial mode File, not %s",
				 mode);
	if (cfg->serial != SERIAL_FILE && (json_field(o, "truncate") || json_field(o, "limit")))
		return json_fail(
		    err, errlen,
		    "fields 'serial.truncate' and 'serial.limit' need serial mode File");
	return 0;
}

/* console and debug_console: lvmm has neither virtio-console nor the 0xe9 port, so only Off
 * (or Null, which asks for a sink) is accepted. */
static int json_to_console(const json_t *root, const char *name, json_t *extra, char *err,
			   unsigned errlen)
{
	static const char *const keys[] = {"mode",	  "file",	   "socket", "iommu", "id",
					   "pci_segment", "pci_device_id", "iobase", NULL};
	const json_t *o, *m;
	const char *mode;
	int r;

	r = json_get_object(root, name, &o, err, errlen);
	if (r || !o)
		return r;
	json_note_keys(o, name, keys);
	m = json_field(o, "mode");
	if (!json_is_string(m))
		return json_fail(err, errlen, "field '%s.mode' must be a string", name);
	mode = json_string_value(m);
	if (strcmp(mode, "Off") && strcmp(mode, "Null"))
		return json_fail(err, errlen,
				 "field '%s.mode' value '%.16s' is unsupported: lvmm has no %s "
				 "device (Off or Null only)",
				 name, mode,
				 strcmp(name, "console") ? "debug console" : "virtio-console");
	json_object_set_new(extra, name, json_pack("{s:s}", "mode", mode));
	return 0;
}

/* rng: the device cloud-hypervisor always creates, here when the body names it (Kata's always
 * does). src must be the kernel's random, urandom or hwrng device (config_validate checks). */
static int json_to_rng(const json_t *root, unsigned nseg, struct vm_config *cfg, json_t *extra,
		       char *err, unsigned errlen)
{
	static const char *const keys[] = {"src",	    "id",    "pci_segment",
					   "pci_device_id", "iommu", NULL};
	char src[CONFIG_PATH_MAX] = "";
	const json_t *o;
	uint64_t seg = 0;
	bool iommu = false;
	int r;

	r = json_get_object(root, "rng", &o, err, errlen);
	if (r || !o)
		return r;
	json_note_keys(o, "rng", keys);
	r = json_get_str(o, "rng", "src", src, sizeof(src), err, errlen);
	if (!r)
		r = json_get_bool(o, "rng", "iommu", &iommu, err, errlen);
	if (!r)
		r = json_get_u64(o, "rng", "pci_segment", 0, 65535, &seg, err, errlen);
	if (r)
		return r;
	if (!*src)
		return json_fail(err, errlen, "field 'rng.src' is required");
	if (iommu)
		return json_unsupported(err, errlen, "rng", "iommu", "lvmm has no virtual IOMMU");
	if (seg >= nseg)
		return json_fail(err, errlen,
				 "field 'rng.pci_segment' value %llu is not below "
				 "platform.num_pci_segments %u",
				 (unsigned long long)seg, nseg);
	if (seg)
		return json_unsupported(err, errlen, "rng", "pci_segment",
					"lvmm places devices on PCI segment 0");
	if (json_field(o, "pci_device_id"))
		return json_unsupported(err, errlen, "rng", "pci_device_id",
					"lvmm chooses the slot itself");
	memcpy(cfg->rng_src, src, sizeof(cfg->rng_src));
	json_keep(extra, "rng", "src", json_field(o, "src"));
	json_object_set_new(json_object_get(extra, "rng"), "iommu", json_false());
	return 0;
}

static int json_to_platform(const json_t *root, unsigned *nseg, json_t *extra, char *err,
			    unsigned errlen)
{
	static const struct json_rule rules[] = {
	    {"iommu_segments", JD_EMPTY, "lvmm has no virtual IOMMU"},
	    {"iommu_address_width_bits", JD_ABSENT, "lvmm has no virtual IOMMU"},
	    {"serial_number", JD_NOSTR, "lvmm has no SMBIOS tables"},
	    {"system_serial_number", JD_NOSTR, "lvmm has no SMBIOS tables"},
	    {"uuid", JD_NOSTR, "lvmm has no SMBIOS tables"},
	    {"system_uuid", JD_NOSTR, "lvmm has no SMBIOS tables"},
	    {"oem_strings", JD_EMPTY, "lvmm has no SMBIOS tables"},
	    {"system_manufacturer", JD_NOSTR, "lvmm has no SMBIOS tables"},
	    {"system_product_name", JD_NOSTR, "lvmm has no SMBIOS tables"},
	    {"system_version", JD_NOSTR, "lvmm has no SMBIOS tables"},
	    {"system_family", JD_NOSTR, "lvmm has no SMBIOS tables"},
	    {"system_sku_number", JD_NOSTR, "lvmm has no SMBIOS tables"},
	    {"chassis_asset_tag", JD_NOSTR, "lvmm has no SMBIOS tables"},
	    {"tdx", JD_FALSE, "lvmm has no confidential guests"},
	    {"sev_snp", JD_FALSE, "lvmm has no confidential guests"},
	    {"iommufd", JD_FALSE, "lvmm has no VFIO devices"},
	    {"vfio_p2p_dma", JD_ANYBOOL, ""},
	    {NULL, 0, NULL},
	};
	static const char *const mine[] = {"num_pci_segments", NULL};
	const char *keys[32];
	const json_t *o;
	uint64_t n = 1;
	int r;

	*nseg = 1;
	r = json_get_object(root, "platform", &o, err, errlen);
	if (r || !o)
		return r;
	json_keys_of(rules, mine, keys, 32);
	json_note_keys(o, "platform", keys);
	r = json_check_rules(o, "platform", rules, err, errlen);
	/* cloud-hypervisor's bound. The ACPI tables describe every segment (a host bridge and
	 * an MCFG entry each); every device lvmm builds sits on segment 0 (docs/api.md). */
	if (!r)
		r = json_get_u64(o, "platform", "num_pci_segments", 1, API_MAX_PCI_SEGMENTS, &n,
				 err, errlen);
	if (r)
		return r;
	*nseg = (unsigned)n;
	json_object_set_new(extra, "platform",
			    json_pack("{s:I}", "num_pci_segments", (json_int_t)n));
	return 0;
}

/* A device's "id": a name of 1-63 characters of [A-Za-z0-9_.-], or absent. */
static int json_get_id(const json_t *obj, const char *where, char *id, size_t size, char *err,
		       unsigned errlen)
{
	int r = json_get_str(obj, where, "id", id, size, err, errlen);

	if (!r && id[0] && !config_vnvme_name_ok(id, strlen(id), size))
		r = json_fail(err, errlen,
			      "field '%s.id' '%s' is not 1-63 characters of [A-Za-z0-9_.-]", where,
			      id);
	return r;
}

/* cloud-hypervisor's DiskConfig; what lvmm's virtio-blk lacks is refused by name. */
int api_json_to_disk(const json_t *obj, const char *where, struct virtio_blk_config *c, char *err,
		     unsigned errlen)
{
	static const struct json_rule rules[] = {
	    {"iommu", JD_FALSE, "lvmm has no virtual IOMMU"},
	    {"vhost_user", JD_FALSE, "lvmm serves disks itself, not through vhost-user"},
	    {"vhost_socket", JD_ABSENT, "lvmm serves disks itself, not through vhost-user"},
	    {"rate_limit_group", JD_ABSENT, "lvmm has no rate-limited virtio devices"},
	    {"rate_limiter_config", JD_ABSENT, "lvmm has no rate-limited virtio devices"},
	    {"disable_io_uring", JD_FALSE, "lvmm's virtio-blk always runs on io_uring"},
	    {"disable_aio", JD_ANYBOOL, ""},
	    {"queue_affinity", JD_EMPTY, "lvmm's virtio-blk has one I/O thread per disk"},
	    {"pci_segment", JD_ZERO, "lvmm places devices on PCI segment 0"},
	    {NULL, 0, NULL},
	};
	static const char *const mine[] = {"path",	 "readonly", "direct", "num_queues",
					   "queue_size", "id",	     "serial", NULL};
	const char *keys[24];
	uint64_t nq = 0, qs = 0;
	int r;

	memset(c, 0, sizeof(*c));
	if (!json_is_object(obj))
		return json_fail(err, errlen, "'%s' must be an object", where);
	json_keys_of(rules, mine, keys, 24);
	json_note_keys(obj, where, keys);
	r = json_check_rules(obj, where, rules, err, errlen);
	if (!r)
		r = json_get_str(obj, where, "path", c->path, sizeof(c->path), err, errlen);
	if (!r && !c->path[0])
		r = json_fail(err, errlen, "field '%s.path' is required", where);
	if (!r)
		r = json_get_bool(obj, where, "readonly", &c->readonly, err, errlen);
	if (!r)
		r = json_get_bool(obj, where, "direct", &c->direct, err, errlen);
	if (!r)
		r = json_get_u64(obj, where, "num_queues", 1, VIRTIO_BLK_MAX_QUEUES, &nq, err,
				 errlen);
	if (!r)
		r = json_get_u64(obj, where, "queue_size", 2, VIRTIO_BLK_MAX_QUEUE_SIZE, &qs, err,
				 errlen);
	if (!r && qs & (qs - 1))
		r = json_fail(err, errlen, "field '%s.queue_size' %llu is not a power of two",
			      where, (unsigned long long)qs);
	if (!r)
		r = json_get_id(obj, where, c->id, sizeof(c->id), err, errlen);
	if (!r)
		r = json_get_str(obj, where, "serial", c->serial, sizeof(c->serial), err, errlen);
	c->num_queues = (unsigned)nq;
	c->queue_size = (unsigned)qs;
	return r;
}

json_t *api_disk_to_json(const struct virtio_blk_config *c)
{
	json_t *o = json_pack("{s:s, s:s, s:b, s:b, s:i, s:i}", "id", c->id, "path", c->path,
			      "readonly", c->readonly, "direct", c->direct, "num_queues",
			      (int)(c->num_queues ? c->num_queues : 1), "queue_size",
			      (int)(c->queue_size ? c->queue_size : VIRTIO_BLK_QUEUE_SIZE));

	if (o && c->serial[0])
		json_object_set_new(o, "serial", json_string(c->serial));
	return o;
}

/* One entry of a device list of vm.create, at index i of cfg's array. */
typedef int (*json_device_fn)(const json_t *item, const char *where, struct vm_config *cfg,
			      size_t i, char *err, unsigned errlen);

/* The root's device list key (absent: nothing): an array of at most max entries, each given to
 * fn; *count gets their number. */
static int json_device_list(const json_t *root, const char *key, size_t max, struct vm_config *cfg,
			    json_device_fn fn, unsigned *count, char *err, unsigned errlen)
{
	const json_t *a = json_field(root, key);
	size_t i;

	if (!a)
		return 0;
	if (!json_is_array(a))
		return json_fail(err, errlen, "field '%s' must be an array", key);
	if (json_array_size(a) > max)
		return json_fail(err, errlen, "field '%s' has %zu devices, max %zu", key,
				 json_array_size(a), max);
	for (i = 0; i < json_array_size(a); i++) {
		char where[32];
		int r;

		snprintf(where, sizeof(where), "%s[%zu]", key, i);
		r = fn(json_array_get(a, i), where, cfg, i, err, errlen);
		if (r)
			return r;
	}
	*count = (unsigned)i;
	return 0;
}

static int json_fs_item(const json_t *item, const char *where, struct vm_config *cfg, size_t i,
			char *err, unsigned errlen)
{
	struct virtio_fs_config *c = &cfg->fs[i];
	int r = api_json_to_fs(item, where, c, err, errlen);

	if (!r && !c->id[0])
		snprintf(c->id, sizeof(c->id), "fs%zu", i);
	return r;
}

static int json_vfio_item(const json_t *item, const char *where, struct vm_config *cfg, size_t i,
			  char *err, unsigned errlen)
{
	struct vfio_pci_config *c = &cfg->devices[i];
	int r = api_json_to_device(item, where, c, err, errlen);

	if (!r && !c->id[0])
		snprintf(c->id, sizeof(c->id), "dev%zu", i);
	return r;
}

static int json_vnvme_item(const json_t *item, const char *where, struct vm_config *cfg, size_t i,
			   char *err, unsigned errlen)
{
	struct vnvme_config *c = &cfg->vnvme[i];
	int r = api_json_to_vnvme(item, where, c, err, errlen);

	if (r)
		return r;
	if (!*c->id)
		snprintf(c->id, sizeof(c->id), "nvme%zu", i);
	for (size_t j = 0; j < i; j++)
		if (!strcmp(cfg->vnvme[j].id, c->id))
			return json_fail(err, errlen, "vnvme id '%s' used twice", c->id);
	return 0;
}

static int json_disk_item(const json_t *item, const char *where, struct vm_config *cfg, size_t i,
			  char *err, unsigned errlen)
{
	int r = api_json_to_disk(item, where, &cfg->disks[i], err, errlen);

	if (!r && !cfg->disks[i].id[0])
		snprintf(cfg->disks[i].id, sizeof(cfg->disks[i].id), "disk%zu", i);
	return r;
}

/* cloud-hypervisor's NetConfig. ip and mask address the host side of a tap cloud-hypervisor
 * creates; lvmm leaves that to the host, so they are taken only at the schema's defaults or with
 * fds (a tap someone else set up). "fds" lists the tap fds of the request (SCM_RIGHTS): the
 * route puts the received ones in their place. */
int api_json_to_net(const json_t *obj, const char *where, struct virtio_net_config *c, char *err,
		    unsigned errlen)
{
	static const struct json_rule rules[] = {
	    {"iommu", JD_FALSE, "lvmm has no virtual IOMMU"},
	    {"vhost_user", JD_FALSE, "lvmm serves virtio-net itself, not through vhost-user"},
	    {"vhost_socket", JD_ABSENT, "lvmm serves virtio-net itself, not through vhost-user"},
	    {"vhost_mode", JD_ANYSTR, ""},
	    {"host_mac", JD_NOSTR, "lvmm does not set the tap's own address"},
	    {"rate_limiter_config", JD_ABSENT, "lvmm has no rate-limited virtio devices"},
	    {"pci_segment", JD_ZERO, "lvmm places devices on PCI segment 0"},
	    {NULL, 0, NULL},
	};
	static const char *const mine[] = {
	    "tap", "ip",  "mask",	 "mac",		"mtu",		"num_queues", "queue_size",
	    "id",  "fds", "offload_tso", "offload_ufo", "offload_csum", NULL};
	const char *keys[32];
	char mac[24] = "", ip[48] = "", mask[48] = "";
	uint64_t nq = 0, qs = 0, mtu = 0;
	bool tso = true, ufo = true, csum = true;
	const json_t *fds;
	int r;

	memset(c, 0, sizeof(*c));
	if (!json_is_object(obj))
		return json_fail(err, errlen, "'%s' must be an object", where);
	json_keys_of(rules, mine, keys, 32);
	json_note_keys(obj, where, keys);
	r = json_check_rules(obj, where, rules, err, errlen);
	if (!r)
		r = json_get_str(obj, where, "tap", c->tap, sizeof(c->tap), err, errlen);
	if (!r)
		r = json_get_str(obj, where, "mac", mac, sizeof(mac), err, errlen);
	if (!r && mac[0] && config_parse_mac(mac, c->mac))
		r = json_fail(err, errlen, "field '%s.mac' '%s' is not xx:xx:xx:xx:xx:xx", where,
			      mac);
	if (!r)
		r = json_get_u64(obj, where, "mtu", 68, 65535, &mtu, err, errlen);
	if (!r)
		r = json_get_u64(obj, where, "num_queues", 2, 2 * VIRTIO_NET_MAX_PAIRS, &nq, err,
				 errlen);
	if (!r)
		r = json_get_u64(obj, where, "queue_size", 2, 1024, &qs, err, errlen);
	if (!r)
		r = json_get_id(obj, where, c->id, sizeof(c->id), err, errlen);
	if (!r)
		r = json_get_bool(obj, where, "offload_tso", &tso, err, errlen);
	if (!r)
		r = json_get_bool(obj, where, "offload_ufo", &ufo, err, errlen);
	if (!r)
		r = json_get_bool(obj, where, "offload_csum", &csum, err, errlen);
	fds = json_field(obj, "fds");
	if (!r && fds) {
		if (!json_is_array(fds) || json_array_size(fds) > VIRTIO_NET_MAX_PAIRS)
			r = json_fail(err, errlen,
				      "field '%s.fds' must be an array of at most %d fds", where,
				      VIRTIO_NET_MAX_PAIRS);
		for (size_t i = 0; !r && i < json_array_size(fds); i++) {
			const json_t *f = json_array_get(fds, i);

			if (!json_is_integer(f) || json_integer_value(f) < 0 ||
			    json_integer_value(f) > INT32_MAX)
				r = json_fail(err, errlen, "field '%s.fds[%zu]' is not an fd",
					      where, i);
			else
				c->fds[c->nfds++] = (int)json_integer_value(f);
		}
	}
	if (!r)
		r = json_get_str(obj, where, "ip", ip, sizeof(ip), err, errlen);
	if (!r)
		r = json_get_str(obj, where, "mask", mask, sizeof(mask), err, errlen);
	if (!r && !c->nfds &&
	    ((ip[0] && strcmp(ip, "192.168.249.1")) || (mask[0] && strcmp(mask, "255.255.255.0"))))
		r = json_fail(err, errlen,
			      "field '%s.ip' is unsupported: lvmm does not address the tap's host "
			      "side (set it with ip(8), or pass the tap's fds)",
			      where);
	c->mtu = (unsigned)mtu;
	c->queue_size = (unsigned)qs;
	c->no_tso = !tso;
	c->no_ufo = !ufo;
	c->no_csum = !csum;
	/* with fds and no count, one pair per fd */
	c->num_queues = nq ? (unsigned)nq : (c->nfds ? 2 * c->nfds : 0);
	if (!r && c->nfds && c->num_queues != 2 * c->nfds)
		r = json_fail(err, errlen, "field '%s.num_queues' %u needs %u fds, not %u", where,
			      c->num_queues, c->num_queues / 2, c->nfds);
	return r;
}

json_t *api_net_to_json(const struct virtio_net_config *c, unsigned idx)
{
	char id[sizeof(c->id)], mac[24];
	json_t *o;

	virtio_net_id(c, idx, id, sizeof(id));
	snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", c->mac[0], c->mac[1], c->mac[2],
		 c->mac[3], c->mac[4], c->mac[5]);
	o = json_pack("{s:s, s:i, s:i, s:b, s:b, s:b, s:b, s:b, s:i}", "id", id, "num_queues",
		      (int)(c->num_queues ? c->num_queues : 2), "queue_size",
		      (int)(c->queue_size ? c->queue_size : 256), "offload_tso", !c->no_tso,
		      "offload_ufo", !c->no_ufo, "offload_csum", !c->no_csum, "iommu", 0,
		      "vhost_user", 0, "pci_segment", 0);
	if (o && c->tap[0])
		json_object_set_new(o, "tap", json_string(c->tap));
	if (o && memcmp(c->mac, "\0\0\0\0\0\0", 6))
		json_object_set_new(o, "mac", json_string(mac));
	if (o && c->mtu)
		json_object_set_new(o, "mtu", json_integer(c->mtu));
	return o;
}

static int json_net_item(const json_t *item, const char *where, struct vm_config *cfg, size_t i,
			 char *err, unsigned errlen)
{
	struct virtio_net_config *n = &cfg->nets[i];
	int r = api_json_to_net(item, where, n, err, errlen);

	if (!r && n->nfds)
		r = json_fail(err, errlen,
			      "field '%s.fds' is unsupported in vm.create: hand tap fds over with "
			      "vm.add-net",
			      where);
	if (!r && !n->tap[0])
		r = json_fail(err, errlen, "field '%s.tap' is required", where);
	if (!r && !n->id[0])
		snprintf(n->id, sizeof(n->id), "net%zu", i);
	return r;
}

/* cloud-hypervisor's VsockConfig: cid, socket, id; iommu and pci_segment at their defaults. */
int api_json_to_vsock(const json_t *obj, const char *where, struct virtio_vsock_config *c,
		      char *err, unsigned errlen)
{
	static const struct json_rule rules[] = {
	    {"iommu", JD_FALSE, "lvmm has no virtual IOMMU"},
	    {"pci_segment", JD_ZERO, "lvmm places devices on PCI segment 0"},
	    {NULL, 0, NULL},
	};
	static const char *const mine[] = {"cid", "socket", "id", NULL};
	const char *keys[8];
	int r;

	memset(c, 0, sizeof(*c));
	if (!json_is_object(obj))
		return json_fail(err, errlen, "'%s' must be an object", where);
	json_keys_of(rules, mine, keys, 8);
	json_note_keys(obj, where, keys);
	r = json_check_rules(obj, where, rules, err, errlen);
	if (!r && !json_field(obj, "cid"))
		r = json_fail(err, errlen, "field '%s.cid' is required", where);
	if (!r)
		r = json_get_u64(obj, where, "cid", VIRTIO_VSOCK_MIN_CID, UINT32_MAX - 1, &c->cid,
				 err, errlen);
	if (!r)
		r = json_get_str(obj, where, "socket", c->socket, sizeof(c->socket), err, errlen);
	if (!r && !c->socket[0])
		r = json_fail(err, errlen, "field '%s.socket' is required", where);
	if (!r)
		r = json_get_id(obj, where, c->id, sizeof(c->id), err, errlen);
	if (!r && config_validate_vsock(c, err, errlen))
		r = -EINVAL;
	return r;
}

json_t *api_vsock_to_json(const struct virtio_vsock_config *c)
{
	char id[sizeof(c->id)];

	virtio_vsock_id(c, id, sizeof(id));
	return json_pack("{s:I, s:s, s:b, s:i, s:s}", "cid", (json_int_t)c->cid, "socket",
			 c->socket, "iommu", 0, "pci_segment", 0, "id", id);
}

/* cloud-hypervisor's FsConfig: tag, socket, num_queues, queue_size, id; pci_segment 0 (and the
 * DAX fields of older releases at their off values). */
int api_json_to_fs(const json_t *obj, const char *where, struct virtio_fs_config *c, char *err,
		   unsigned errlen)
{
	static const struct json_rule rules[] = {
	    {"pci_segment", JD_ZERO, "lvmm places devices on PCI segment 0"},
	    {"dax", JD_FALSE, "lvmm has no DAX window for virtio-fs"},
	    {"cache_size", JD_ZERO, "lvmm has no DAX window for virtio-fs"},
	    {NULL, 0, NULL},
	};
	static const char *const mine[] = {"tag", "socket", "num_queues", "queue_size", "id", NULL};
	const char *keys[12];
	uint64_t nq = 0, qs = 0;
	int r;

	memset(c, 0, sizeof(*c));
	if (!json_is_object(obj))
		return json_fail(err, errlen, "'%s' must be an object", where);
	json_keys_of(rules, mine, keys, 12);
	json_note_keys(obj, where, keys);
	r = json_check_rules(obj, where, rules, err, errlen);
	if (!r)
		r = json_get_str(obj, where, "tag", c->tag, sizeof(c->tag), err, errlen);
	if (!r && !c->tag[0])
		r = json_fail(err, errlen, "field '%s.tag' is required", where);
	if (!r)
		r = json_get_str(obj, where, "socket", c->socket, sizeof(c->socket), err, errlen);
	if (!r && !c->socket[0])
		r = json_fail(err, errlen, "field '%s.socket' is required", where);
	if (!r)
		r = json_get_u64(obj, where, "num_queues", 1, VIRTIO_FS_MAX_QUEUES, &nq, err,
				 errlen);
	if (!r)
		r = json_get_u64(obj, where, "queue_size", 2, VIRTIO_FS_QUEUE_MAX, &qs, err,
				 errlen);
	c->num_queues = (unsigned)nq;
	c->queue_size = (unsigned)qs;
	if (!r)
		r = json_get_id(obj, where, c->id, sizeof(c->id), err, errlen);
	if (!r && config_validate_fs(c, err, errlen))
		r = -EINVAL;
	return r;
}

json_t *api_fs_to_json(const struct virtio_fs_config *c, unsigned idx)
{
	char id[sizeof(c->id)];

	virtio_fs_id(c, idx, id, sizeof(id));
	return json_pack("{s:s, s:s, s:i, s:i, s:i, s:s}", "tag", c->tag, "socket", c->socket,
			 "num_queues", (int)(c->num_queues ? c->num_queues : 1), "queue_size",
			 (int)(c->queue_size ? c->queue_size : VIRTIO_FS_QUEUE_SIZE), "pci_segment",
			 0, "id", id);
}

int api_json_to_device(const json_t *obj, const char *where, struct vfio_pci_config *c, char *err,
		       unsigned errlen)
{
	static const struct json_rule rules[] = {
	    {"iommu", JD_FALSE, "lvmm has no virtual IOMMU"},
	    {"pci_segment", JD_ZERO, "lvmm places devices on PCI segment 0"},
	    {"x_nv_gpudirect_clique", JD_ABSENT, "lvmm has no GPUDirect P2P cliques"},
	    {"x_exclude_mmap_bars", JD_EMPTY, "lvmm maps every BAR VFIO lets it"},
	    {NULL, 0, NULL},
	};
	static const char *const mine[] = {"path", "id", NULL};
	const char *keys[8];
	int r;

	memset(c, 0, sizeof(*c));
	if (!json_is_object(obj))
		return json_fail(err, errlen, "'%s' must be an object", where);
	json_keys_of(rules, mine, keys, 8);
	json_note_keys(obj, where, keys);
	r = json_check_rules(obj, where, rules, err, errlen);
	if (!r)
		r = json_get_str(obj, where, "path", c->path, sizeof(c->path), err, errlen);
	if (!r && !c->path[0])
		r = json_fail(err, errlen, "field '%s.path' is required", where);
	if (!r)
		r = json_get_id(obj, where, c->id, sizeof(c->id), err, errlen);
	if (!r && config_validate_device(c, err, errlen))
		r = -EINVAL;
	return r;
}

json_t *api_device_to_json(const struct vfio_pci_config *c, unsigned idx)
{
	char id[sizeof(c->id)];

	vfio_pci_id(c, idx, id, sizeof(id));
	return json_pack("{s:s, s:b, s:i, s:s}", "path", c->path, "iommu", 0, "pci_segment", 0,
			 "id", id);
}

static const struct json_rule json_root_rules[] = {
    {"rate_limit_groups", JD_EMPTY, "lvmm has no rate-limited virtio devices"},
    {"balloon", JD_ABSENT, "lvmm has no virtio-balloon"},
    {"generic_vhost_user", JD_EMPTY, "lvmm has no vhost-user devices"},
    {"pmem", JD_EMPTY, "lvmm has no virtio-pmem"},
    {"user_devices", JD_EMPTY, "lvmm has no vfio-user devices"},
    {"vdpa", JD_EMPTY, "lvmm has no vDPA devices"},
    {"numa", JD_EMPTY, "lvmm describes no NUMA nodes"},
    {"iommu", JD_FALSE, "lvmm has no virtual IOMMU"},
    {"watchdog", JD_FALSE, "lvmm has no watchdog device"},
    {"rtc", JD_ABSENT, "lvmm's RTC is the CMOS one, not a PCI device"},
    {"pvpanic", JD_FALSE, "lvmm has no pvpanic device"},
    {"pci_segments", JD_EMPTY, "lvmm does not weigh segment apertures"},
    {"tpm", JD_ABSENT, "lvmm has no TPM"},
    {"landlock_enable", JD_FALSE, "lvmm confines itself with seccomp, not Landlock"},
    {"landlock_rules", JD_EMPTY, "lvmm confines itself with seccomp, not Landlock"},
    {NULL, 0, NULL},
};

int api_json_to_config_ch(const json_t *root, const struct api_vm_ops *ops, struct vm_config *cfg,
			  json_t **extra_out, char *err, unsigned errlen)
{
	static const char *const mine[] = {
	    "cpus",  "memory", "payload", "serial", "console", "debug_console", "rng", "platform",
	    "vnvme", "disks",  "vsock",	  "net",    "fs",      "devices",	NULL};
	const char *keys[48];
	json_t *extra = json_object();
	unsigned nseg = 1;
	int r;

	if (extra_out)
		*extra_out = NULL;
	memset(cfg, 0, sizeof(*cfg));
	if (ops && ops->defaults)
		ops->defaults(cfg);
	if (!extra)
		return json_fail(err, errlen, "out of memory");
	if (!json_is_object(root)) {
		json_decref(extra);
		return json_fail(err, errlen, "VmConfig must be a JSON object");
	}
	json_keys_of(json_root_rules, mine, keys, 48);
	json_note_keys(root, "", keys);
	r = json_check_rules(root, "", json_root_rules, err, errlen);
	if (!r)
		r = json_to_platform(root, &nseg, extra, err, errlen);
	cfg->num_pci_segments = nseg;
	if (!r)
		r = json_to_cpus(root, cfg, extra, err, errlen);
	if (!r)
		r = json_to_memory(root, cfg, extra, err, errlen);
	if (!r)
		r = json_to_payload(root, cfg, err, errlen);
	if (!r)
		r = json_to_serial(root, cfg, err, errlen);
	if (!r)
		r = json_to_console(root, "console", extra, err, errlen);
	if (!r)
		r = json_to_console(root, "debug_console", extra, err, errlen);
	if (!r)
		r = json_to_rng(root, nseg, cfg, extra, err, errlen);
	if (!r)
		r = json_device_list(root, "vnvme", CONFIG_MAX_VNVME, cfg, json_vnvme_item,
				     &cfg->nvnvme, err, errlen);
	if (!r)
		r = json_device_list(root, "disks", CONFIG_MAX_DISKS, cfg, json_disk_item,
				     &cfg->ndisks, err, errlen);
	if (!r)
		r = json_device_list(root, "net", CONFIG_MAX_NETS, cfg, json_net_item, &cfg->nnets,
				     err, errlen);
	if (!r)
		r = json_device_list(root, "fs", CONFIG_MAX_FS, cfg, json_fs_item, &cfg->nfs, err,
				     errlen);
	if (!r)
		r = json_device_list(root, "devices", CONFIG_MAX_DEVICES, cfg, json_vfio_item,
				     &cfg->ndevices, err, errlen);
	if (!r && json_field(root, "vsock")) {
		r = api_json_to_vsock(json_field(root, "vsock"), "vsock", &cfg->vsock, err, errlen);
		cfg->has_vsock = !r;
	}
	if (!r && ops && ops->validate)
		r = ops->validate(cfg, err, errlen);
	if (!r && extra_out)
		*extra_out = extra;
	else
		json_decref(extra);
	return r < 0 ? r : (r ? -EINVAL : 0);
}

int api_json_to_config(const json_t *root, const struct api_vm_ops *ops, struct vm_config *cfg,
		       char *err, unsigned errlen)
{
	return api_json_to_config_ch(root, ops, cfg, NULL, err, errlen);
}

/* Absent options are left out: the schema has plain strings where lvmm has none to show. */
static void json_set_str(json_t *o, const char *key, const char *s)
{
	if (o && *s)
		json_object_set_new(o, key, json_string(s));
}

json_t *api_vnvme_to_json(const struct vnvme_config *c)
{
	json_t *o =
	    json_pack("{s:s, s:I, s:b, s:s, s:I, s:s}", "id", c->id, "size", (json_int_t)c->size,
		      "readonly", c->readonly, "mode", api_vnvme_mode_name(c->mode), "num_queues",
		      (json_int_t)c->queues, "doorbell",
		      c->doorbell == VNVME_DB_POLL	? "poll"
		      : c->doorbell == VNVME_DB_EVENTFD ? "eventfd"
							: "auto");

	json_set_str(o, "path", c->path);
	json_set_str(o, "ssd", c->ssd);
	json_set_str(o, "vol", c->vol);
	json_set_str(o, "serial", c->serial);
	return o;
}

json_t *api_config_to_json(const struct vm_config *cfg)
{
	json_t *list = json_array(), *disks = json_array(), *nets = json_array(), *o, *payload,
	       *serial;
	unsigned i;

	for (i = 0; list && i < cfg->nvnvme && i < CONFIG_MAX_VNVME; i++)
		json_array_append_new(list, api_vnvme_to_json(&cfg->vnvme[i]));
	for (i = 0; disks && i < cfg->ndisks && i < CONFIG_MAX_DISKS; i++)
		json_array_append_new(disks, api_disk_to_json(&cfg->disks[i]));
	for (i = 0; nets && i < cfg->nnets && i < CONFIG_MAX_NETS; i++)
		json_array_append_new(nets, api_net_to_json(&cfg->nets[i], i));
	payload = json_pack("{s:s, s:s}", "kernel", cfg->kernel, "cmdline", cfg->cmdline);
	json_set_str(payload, "initramfs", cfg->initramfs);
	serial = json_pack("{s:s}", "mode", api_serial_mode_name(cfg->serial));
	if (serial && cfg->serial == SERIAL_FILE) {
		json_set_str(serial, "file", cfg->serial_file);
		json_object_set_new(serial, "truncate", json_boolean(cfg->serial_truncate));
		json_object_set_new(serial, "limit", json_integer((json_int_t)cfg->serial_limit));
	}
	/* What lvmm builds for the fields it only accepts at their defaults. */
	o = json_pack("{s:{s:i, s:i, s:b}, s:{s:I, s:b, s:b, s:b, s:s}, s:o, s:o, s:{s:s},"
		      " s:b, s:b, s:b, s:o, s:o}",
		      "cpus", "boot_vcpus", (int)cfg->cpus, "max_vcpus", (int)cfg->max_cpus,
		      "kvm_hyperv", 0, "memory", "size", (json_int_t)cfg->memory, "mergeable", 0,
		      "hugepages", 0, "shared", 1, "hotplug_method", "Acpi", "payload", payload,
		      "serial", serial, "console", "mode", "Off", "iommu", 0, "watchdog", 0,
		      "pvpanic", 0, "vnvme", list, "disks", disks);
	if (o && cfg->has_vsock)
		json_object_set_new(o, "vsock", api_vsock_to_json(&cfg->vsock));
	if (o && cfg->nnets)
		json_object_set_new(o, "net", nets);
	else
		json_decref(nets);
	if (o && cfg->nfs) {
		json_t *fs = json_array();

		for (i = 0; fs && i < cfg->nfs && i < CONFIG_MAX_FS; i++)
			json_array_append_new(fs, api_fs_to_json(&cfg->fs[i], i));
		json_object_set_new(o, "fs", fs);
	}
	if (o && cfg->ndevices) {
		json_t *devs = json_array();

		for (i = 0; devs && i < cfg->ndevices && i < CONFIG_MAX_DEVICES; i++)
			json_array_append_new(devs, api_device_to_json(&cfg->devices[i], i));
		json_object_set_new(o, "devices", devs);
	}
	return o;
}

json_t *api_config_to_json_ch(const struct vm_config *cfg, const json_t *extra)
{
	json_t *o = api_config_to_json(cfg);

	if (o && extra && json_object_update_recursive(o, (json_t *)extra)) {
		json_decref(o);
		return NULL;
	}
	return o;
}
