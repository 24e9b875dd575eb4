/* VmConfig JSON (cloud-hypervisor's field names, lvmm's subset plus "vnvme") <-> struct
 * vm_config. Strict: unknown fields, wrong types and out-of-range values are errors naming them. */
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
	static const char *const keys[] = {"id",	 "path", "ssd",	       "vol",
					   "size",	 "readonly", "serial", "mode",
					   "num_queues", "doorbell", NULL};
	uint64_t nq = 0;
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
				 "field '%s.doorbell' value '%s' is not poll, eventfd or auto", where,
				 db);

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
	return 0;
}

static int json_to_cpus(const json_t *root, struct vm_config *cfg, char *err, unsigned errlen)
{
	static const char *const keys[] = {"boot_vcpus", "max_vcpus", NULL};
	const json_t *o;
	uint64_t boot = cfg->cpus, max = 0;
	int r;

	r = json_get_object(root, "cpus", &o, err, errlen);
	if (r || !o)
		return r;
	r = json_check_keys(o, "cpus", keys, err, errlen);
	if (!r)
		r = json_get_u64(o, "cpus", "boot_vcpus", 1, JSON_MAX_VCPUS, &boot, err, errlen);
	if (!r)
		r = json_get_u64(o, "cpus", "max_vcpus", 1, JSON_MAX_VCPUS, &max, err, errlen);
	if (r)
		return r;
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

static int json_to_memory(const json_t *root, struct vm_config *cfg, char *err, unsigned errlen)
{
	static const char *const keys[] = {"size", NULL};
	const json_t *o;
	int r;

	r = json_get_object(root, "memory", &o, err, errlen);
	if (r || !o)
		return r;
	r = json_check_keys(o, "memory", keys, err, errlen);
	if (!r)
		r = json_get_u64(o, "memory", "size", 1, UINT64_MAX >> 1, &cfg->memory, err,
				 errlen);
	return r;
}

static int json_to_payload(const json_t *root, struct vm_config *cfg, char *err, unsigned errlen)
{
	static const char *const keys[] = {"kernel", "initramfs", "cmdline", NULL};
	const json_t *o;
	int r;

	r = json_get_object(root, "payload", &o, err, errlen);
	if (r || !o)
		return r;
	r = json_check_keys(o, "payload", keys, err, errlen);
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
	static const char *const keys[] = {"mode", "file", "truncate", "limit", NULL};
	const json_t *o;
	char mode[8] = "";
	int r;

	r = json_get_object(root, "serial", &o, err, errlen);
	if (r || !o)
		return r;
	r = json_check_keys(o, "serial", keys, err, errlen);
	if (!r)
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
		return json_fail(err, errlen,
				 "fields 'serial.truncate' and 'serial.limit' need serial mode File");
	return 0;
}

static int json_to_vnvme_list(const json_t *root, struct vm_config *cfg, char *err, unsigned errlen)
{
	const json_t *a = json_field(root, "vnvme");
	size_t i, j;
	int r;

	if (!a)
		return 0;
	if (!json_is_array(a))
		return json_fail(err, errlen, "field 'vnvme' must be an array");
	if (json_array_size(a) > CONFIG_MAX_VNVME)
		return json_fail(err, errlen, "field 'vnvme' has %zu devices, max %d",
				 json_array_size(a), CONFIG_MAX_VNVME);
	for (i = 0; i < json_array_size(a); i++) {
		struct vnvme_config *c = &cfg->vnvme[i];
		char where[32];

		snprintf(where, sizeof(where), "vnvme[%zu]", i);
		r = api_json_to_vnvme(json_array_get(a, i), where, c, err, errlen);
		if (r)
			return r;
		if (!*c->id)
			snprintf(c->id, sizeof(c->id), "nvme%zu", i);
		for (j = 0; j < i; j++)
			if (!strcmp(cfg->vnvme[j].id, c->id))
				return json_fail(err, errlen, "vnvme id '%s' used twice", c->id);
	}
	cfg->nvnvme = i;
	return 0;
}

int api_json_to_config(const json_t *root, const struct api_vm_ops *ops, struct vm_config *cfg,
		       char *err, unsigned errlen)
{
	static const char *const keys[] = {"cpus", "memory", "payload", "serial", "vnvme", NULL};
	int r;

	memset(cfg, 0, sizeof(*cfg));
	if (ops && ops->defaults)
		ops->defaults(cfg);
	if (!json_is_object(root))
		return json_fail(err, errlen, "VmConfig must be a JSON object");
	r = json_check_keys(root, "", keys, err, errlen);
	if (!r)
		r = json_to_cpus(root, cfg, err, errlen);
	if (!r)
		r = json_to_memory(root, cfg, err, errlen);
	if (!r)
		r = json_to_payload(root, cfg, err, errlen);
	if (!r)
		r = json_to_serial(root, cfg, err, errlen);
	if (!r)
		r = json_to_vnvme_list(root, cfg, err, errlen);
	if (!r && ops && ops->validate)
		r = ops->validate(cfg, err, errlen);
	return r < 0 ? r : (r ? -EINVAL : 0);
}

/* Optional strings print as null when empty, as cloud-hypervisor prints absent options. */
static json_t *json_opt_str(const char *s)
{
	return *s ? json_string(s) : json_null();
}

json_t *api_vnvme_to_json(const struct vnvme_config *c)
{
	return json_pack("{s:s, s:o, s:o, s:o, s:I, s:b, s:o, s:s, s:I, s:s}", "id", c->id, "path",
			 json_opt_str(c->path), "ssd", json_opt_str(c->ssd), "vol",
			 json_opt_str(c->vol), "size", (json_int_t)c->size, "readonly", c->readonly,
			 "serial", json_opt_str(c->serial), "mode", api_vnvme_mode_name(c->mode),
			 "num_queues", (json_int_t)c->queues, "doorbell",
			 c->doorbell == VNVME_DB_POLL	   ? "poll"
			 : c->doorbell == VNVME_DB_EVENTFD ? "eventfd"
							   : "auto");
}

json_t *api_config_to_json(const struct vm_config *cfg)
{
	json_t *list = json_array();
	unsigned i;

	for (i = 0; list && i < cfg->nvnvme && i < CONFIG_MAX_VNVME; i++)
		json_array_append_new(list, api_vnvme_to_json(&cfg->vnvme[i]));
	return json_pack("{s:{s:i, s:i}, s:{s:I}, s:{s:s, s:o, s:s}, s:{s:s, s:o, s:b, s:I}, s:o}",
			 "cpus", "boot_vcpus", (int)cfg->cpus, "max_vcpus", (int)cfg->max_cpus,
			 "memory", "size", (json_int_t)cfg->memory, "payload", "kernel", cfg->kernel,
			 "initramfs", json_opt_str(cfg->initramfs), "cmdline", cfg->cmdline,
			 "serial", "mode", api_serial_mode_name(cfg->serial), "file",
			 json_opt_str(cfg->serial_file), "truncate", (int)cfg->serial_truncate,
			 "limit", (json_int_t)cfg->serial_limit, "vnvme", list);
}
