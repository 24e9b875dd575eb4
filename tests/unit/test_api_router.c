/* Router and VmConfig JSON mapping tests: every endpoint, every error class, and the VM state
 * machine, driven through api_route() against a fake VM (no KVM, no sockets). */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_api_fake.h"
#include "testutil.h"

/* The file holds exactly want. */
static void slurp_eq(const char *path, const char *want)
{
	char *got = testutil_slurp(path);

	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, want);
	free(got);
}

static struct api_vmm vmm;
static json_t *answer; /* parsed body of the last call, or NULL */
static const char *allow;

static void setup(void)
{
	fake_bad_calls = 0;
	api_vmm_init(&vmm, &fake_ops, NULL);
}

static void teardown(void)
{
	api_vmm_release(&vmm);
	json_decref(answer);
	answer = NULL;
	ck_assert_uint_eq(fake_live, 0);
	ck_assert_uint_eq(fake_bad_calls, 0);
}

static int call(enum http_method m, const char *endpoint, const char *body)
{
	struct api_request req = {.method = m};
	struct api_response resp;
	char *copy = strdup(body ? body : "");

	snprintf(req.path, sizeof(req.path), "%s", endpoint);
	req.body = copy;
	req.body_len = strlen(copy);
	api_route(&vmm, &req, &resp);
	free(copy);
	json_decref(answer);
	answer = NULL;
	allow = resp.allow;
	if (resp.body) {
		answer = json_loads(resp.body, 0, NULL);
		ck_assert_msg(answer != NULL, "answer is not JSON: %s", resp.body);
	}
	if (resp.status == 204)
		ck_assert_ptr_null(resp.body);
	api_response_free(&resp);
	return resp.status;
}

static int put(const char *name, const char *body)
{
	char path[128];

	snprintf(path, sizeof(path), "/api/v1/%s", name);
	return call(HTTP_PUT, path, body);
}

static int get(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/api/v1/%s", name);
	return call(HTTP_GET, path, NULL);
}

static const char *error_text(void)
{
	/* cloud-hypervisor's error body: a list of messages, outermost first */
	const char *s = json_string_value(json_array_get(answer, 0));

	ck_assert_msg(s != NULL, "answer is not a list of messages");
	return s;
}

static const char *state(void)
{
	ck_assert_int_eq(get("vm.info"), 200);
	return json_string_value(json_object_get(answer, "state"));
}

static const char *good_config =
    "{\"cpus\": {\"boot_vcpus\": 2, \"max_vcpus\": 4},"
    " \"memory\": {\"size\": 134217728},"
    " \"payload\": {\"kernel\": \"/boot/vmlinux\", \"initramfs\": \"/boot/initrd\","
    "              \"cmdline\": \"console=ttyS0 bench.mode=spin\"},"
    " \"serial\": {\"mode\": \"File\", \"file\": \"/tmp/console.log\"},"
    " \"vnvme\": [{\"path\": \"/tmp/disk.img\", \"size\": 1048576, \"readonly\": true,"
    "              \"pci_segment\": 0},"
    "             {\"id\": \"fast\", \"ssd\": \"ssd0\", \"vol\": \"v1\", \"mode\": \"isolated\","
    "              \"serial\": \"SN42\", \"num_queues\": 64}]}";

START_TEST(test_ping)
{
	ck_assert_int_eq(get("vmm.ping"), 200);
	ck_assert_str_eq(json_string_value(json_object_get(answer, "version")), API_VERSION);
	ck_assert(json_is_integer(json_object_get(answer, "pid")));
}
END_TEST

START_TEST(test_unknown_endpoint)
{
	ck_assert_int_eq(get("vm.nonsense"), 404);
	ck_assert_ptr_nonnull(strstr(error_text(), "vm.nonsense"));
	ck_assert_int_eq(call(HTTP_GET, "/", NULL), 404);
	ck_assert_int_eq(call(HTTP_GET, "/api/v2/vmm.ping", NULL), 404);
	ck_assert_int_eq(call(HTTP_GET, "/api/v1/vmm.ping/extra", NULL), 404);
	/* Client bytes quoted in the message must still give valid JSON. */
	ck_assert_int_eq(call(HTTP_GET, "/api/v1/\xff\x01\"x", NULL), 404);
	error_text();
}
END_TEST

START_TEST(test_wrong_verb)
{
	/* 400 as cloud-hypervisor answers it; Allow still names the verb */
	ck_assert_int_eq(call(HTTP_GET, "/api/v1/vm.pause", NULL), 400);
	ck_assert_str_eq(allow, "PUT");
	ck_assert_ptr_nonnull(strstr(error_text(), "vm.pause"));
	ck_assert_int_eq(call(HTTP_PUT, "/api/v1/vm.info", NULL), 400);
	ck_assert_str_eq(allow, "GET");
	ck_assert_int_eq(call(HTTP_POST, "/api/v1/vm.create", good_config), 400);
	ck_assert_int_eq(call(HTTP_DELETE, "/api/v1/vmm.shutdown", NULL), 400);
	ck_assert_int_eq(call(HTTP_GET, "/api/v1/vm.add-disk", NULL), 400);
	ck_assert(!vmm.shutdown);
	ck_assert_ptr_null(vmm.vm);
}
END_TEST

START_TEST(test_create_and_info)
{
	json_t *cfg, *nv;

	ck_assert_int_eq(put("vm.create", good_config), 204);
	ck_assert_str_eq(state(), "Created");
	ck_assert_int_eq(json_integer_value(json_object_get(answer, "memory_actual_size")),
			 134217728);
	cfg = json_object_get(answer, "config");
	ck_assert_int_eq(
	    json_integer_value(json_object_get(json_object_get(cfg, "cpus"), "boot_vcpus")), 2);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(json_object_get(cfg, "cpus"), "max_vcpus")), 4);
	ck_assert_str_eq(
	    json_string_value(json_object_get(json_object_get(cfg, "payload"), "cmdline")),
	    "console=ttyS0 bench.mode=spin");
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(cfg, "serial"), "mode")),
			 "File");
	nv = json_object_get(cfg, "vnvme");
	ck_assert_uint_eq(json_array_size(nv), 2);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(nv, 0), "id")), "nvme0");
	ck_assert(json_is_true(json_object_get(json_array_get(nv, 0), "readonly")));
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(nv, 1), "mode")),
			 "isolated");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(nv, 1), "vol")), "v1");
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(nv, 1), "num_queues")),
			 64);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(nv, 0), "num_queues")),
			 0);

	/* The mapping is exact: what vm.info prints is what was asked for. */
	ck_assert_uint_eq(vmm.vm->cfg.cpus, 2);
	ck_assert_uint_eq(vmm.vm->cfg.memory, 134217728);
	ck_assert_str_eq(vmm.vm->cfg.kernel, "/boot/vmlinux");
	ck_assert_str_eq(vmm.vm->cfg.initramfs, "/boot/initrd");
	ck_assert_int_eq(vmm.vm->cfg.serial, SERIAL_FILE);
	ck_assert_str_eq(vmm.vm->cfg.serial_file, "/tmp/console.log");
	ck_assert_uint_eq(vmm.vm->cfg.nvnvme, 2);
	ck_assert_str_eq(vmm.vm->cfg.vnvme[0].path, "/tmp/disk.img");
	ck_assert_uint_eq(vmm.vm->cfg.vnvme[0].size, 1048576);
	ck_assert_str_eq(vmm.vm->cfg.vnvme[1].ssd, "ssd0");
	ck_assert_str_eq(vmm.vm->cfg.vnvme[1].serial, "SN42");
	ck_assert_int_eq(vmm.vm->cfg.vnvme[1].mode, VNVME_ISOLATED);
}
END_TEST

START_TEST(test_config_roundtrip)
{
	char *dump;

	/* vm.info's config fed back into vm.create yields the same config. */
	ck_assert_int_eq(put("vm.create", good_config), 204);
	ck_assert_int_eq(get("vm.info"), 200);
	dump = json_dumps(json_object_get(answer, "config"), JSON_COMPACT);
	struct vm_config before = vmm.vm->cfg;
	ck_assert_int_eq(put("vm.delete", NULL), 204);
	ck_assert_int_eq(put("vm.create", dump), 204);
	free(dump);
	ck_assert_mem_eq(&before, &vmm.vm->cfg, sizeof(before));
}
END_TEST

START_TEST(test_create_defaults)
{
	ck_assert_int_eq(put("vm.create", "{\"payload\": {\"kernel\": \"/k\"}}"), 204);
	ck_assert_uint_eq(vmm.vm->cfg.cpus, 1);
	ck_assert_uint_eq(vmm.vm->cfg.max_cpus, 1);
	ck_assert_uint_eq(vmm.vm->cfg.memory, 256ULL << 20);
	ck_assert_int_eq(vmm.vm->cfg.serial, SERIAL_STDIO);
	ck_assert_uint_eq(vmm.vm->cfg.nvnvme, 0);
	ck_assert_str_eq(state(), "Created");
	/* boot_vcpus alone raises max_vcpus with it */
	ck_assert_int_eq(put("vm.delete", NULL), 204);
	ck_assert_int_eq(put("vm.create", "{\"cpus\": {\"boot_vcpus\": 3},"
					  " \"serial\": {\"mode\": \"Null\", \"file\": null}}"),
			 204);
	ck_assert_uint_eq(vmm.vm->cfg.max_cpus, 3);
	ck_assert_int_eq(vmm.vm->cfg.serial, SERIAL_NULL);
}
END_TEST

/* Each bad VmConfig answers 400 naming the culprit, and creates nothing. */
static const struct {
	const char *body;
	const char *needle;
} bad_configs[] = {
    {"{\"cpus\": {\"boot_vcpus\": 1}", "malformed JSON"},
    {"not json", "malformed JSON"},
    {"[1, 2]", "must be a JSON object"},
    {"{\"console\": {\"mode\": \"Tty\"}}", "'console.mode' value 'Tty' is unsupported"},
    {"{\"console\": {\"mode\": \"Pty\"}}", "virtio-console"},
    {"{\"debug_console\": {\"mode\": \"File\"}}", "debug_console.mode"},
    {"{\"memory\": {\"size\": 1, \"hugepages\": true}}", "'memory.hugepages' is unsupported"},
    {"{\"memory\": {\"size\": 1, \"zones\": [{\"id\": \"z\", \"size\": 1}]}}", "'memory.zones'"},
    {"{\"memory\": {\"size\": 1, \"hotplug_method\": \"VirtioMem\"}}", "virtio-mem"},
    {"{\"memory\": {\"size\": 1, \"mergeable\": 1}}", "'memory.mergeable' has the wrong type"},
    {"{\"cpus\": {\"boot_vcpus\": 1, \"kvm_hyperv\": true}}", "'cpus.kvm_hyperv'"},
    {"{\"cpus\": {\"boot_vcpus\": 2, \"topology\": {\"threads_per_core\": 2}}}",
     "'cpus.topology' is unsupported"},
    {"{\"cpus\": {\"boot_vcpus\": 1, \"affinity\": [{\"vcpu\": 0, \"host_cpus\": [1]}]}}",
     "'cpus.affinity'"},
    {"{\"cpus\": {\"boot_vcpus\": 1, \"features\": {\"amx\": true}}}", "amx"},
    {"{\"payload\": {\"firmware\": \"x\"}}", "'payload.firmware' is unsupported"},
    {"{\"fs\": [{\"tag\": \"kataShared\", \"socket\": \"/v.sock\", \"num_queues\": 1,"
     " \"queue_size\": 1024, \"pci_segment\": 1}]}",
     "'fs[0].pci_segment' is unsupported"},
    {"{\"fs\": [{\"socket\": \"/v.sock\"}]}", "fs[0].tag"},
    {"{\"fs\": [{\"tag\": \"t\", \"socket\": \"/v.sock\", \"num_queues\": 8}]}",
     "fs[0].num_queues"},
    {"{\"vsock\": {\"cid\": 3, \"socket\": \"/k.sock\", \"iommu\": true}}",
     "'vsock.iommu' is unsupported"},
    {"{\"vsock\": {\"cid\": 2, \"socket\": \"/k.sock\"}}", "vsock.cid"},
    {"{\"disks\": [{\"path\": \"/d\", \"vhost_user\": true}]}",
     "'disks[0].vhost_user' is unsupported"},
    {"{\"disks\": [{\"readonly\": true}]}", "disks[0].path"},
    {"{\"devices\": [{\"path\": \"/sys/bus/pci/devices/0000:01:00.0\", \"iommu\": true}]}",
     "'devices[0].iommu' is unsupported"},
    {"{\"devices\": [{\"path\": \"/sys/bus/pci/devices/0000:01:00.0\", \"pci_segment\": 1}]}",
     "'devices[0].pci_segment' is unsupported"},
    {"{\"devices\": [{\"path\": \"/sys/bus/pci/devices/0000:01:00.0\","
     " \"x_nv_gpudirect_clique\": 0}]}",
     "'devices[0].x_nv_gpudirect_clique' is unsupported"},
    {"{\"devices\": [{\"id\": \"gpu0\"}]}", "devices[0].path"},
    {"{\"devices\": [{\"path\": \"0000:01:00.0\", \"x_exclude_mmap_bars\": [2]}]}",
     "'devices[0].x_exclude_mmap_bars' is unsupported"},
    {"{\"net\": [{\"tap\": \"tap0\", \"vhost_user\": true}]}",
     "'net[0].vhost_user' is unsupported"},
    {"{\"net\": [{\"tap\": \"tap0\", \"host_mac\": \"52:54:00:00:00:01\"}]}",
     "'net[0].host_mac' is unsupported"},
    {"{\"net\": [{\"tap\": \"tap0\", \"fds\": [3]}]}", "hand tap fds over with vm.add-net"},
    {"{\"net\": [{\"mac\": \"52:54:00:00:00:01\"}]}", "'net[0].tap' is required"},
    {"{\"pmem\": [{\"file\": \"/img\"}]}", "'pmem'"},
    {"{\"balloon\": {\"size\": 0}}", "'balloon'"},
    {"{\"iommu\": true}", "'iommu' is unsupported"},
    {"{\"watchdog\": true}", "'watchdog'"},
    {"{\"pvpanic\": true}", "'pvpanic'"},
    {"{\"landlock_enable\": true}", "'landlock_enable'"},
    {"{\"tpm\": {\"socket\": \"/t\"}}", "'tpm'"},
    {"{\"platform\": {\"tdx\": true}}", "'platform.tdx'"},
    {"{\"platform\": {\"num_pci_segments\": 0}}", "num_pci_segments"},
    {"{\"platform\": {\"num_pci_segments\": 97}}", "num_pci_segments"},
    {"{\"platform\": {\"oem_strings\": [\"x\"]}}", "SMBIOS"},
    {"{\"rng\": {\"src\": \"/dev/urandom\", \"iommu\": true}}", "'rng.iommu'"},
    {"{\"rng\": {\"iommu\": false}}", "'rng.src' is required"},
    {"{\"rng\": {\"src\": \"/dev/urandom\", \"pci_segment\": 1}}", "not below"},
    {"{\"platform\": {\"num_pci_segments\": 2},"
     " \"rng\": {\"src\": \"/dev/urandom\", \"pci_segment\": 1}}",
     "'rng.pci_segment' is unsupported"},
    {"{\"serial\": {\"mode\": \"Off\", \"socket\": \"x\"}}", "'serial.socket'"},
    {"{\"vnvme\": [{\"path\": \"/d\", \"queues\": 4}]}", "'vnvme[0].queues'"},
    {"{\"vnvme\": [{\"path\": \"/d\", \"pci_segment\": 1}]}",
     "'vnvme[0].pci_segment' is unsupported"},
    {"{\"vnvme\": [{\"path\": \"/d\", \"pci_segment\": 96}]}", "out of range"},
    {"{\"cpus\": {\"boot_vcpus\": \"2\"}}", "must be an integer"},
    {"{\"cpus\": {\"boot_vcpus\": 0}}", "out of range"},
    {"{\"cpus\": {\"boot_vcpus\": 1000}}", "out of range"},
    {"{\"cpus\": {\"boot_vcpus\": 2.5}}", "must be an integer"},
    {"{\"cpus\": {\"boot_vcpus\": 4, \"max_vcpus\": 2}}", "max_vcpus"},
    {"{\"cpus\": 2}", "'cpus' must be an object"},
    {"{\"memory\": {\"size\": -1}}", "out of range"},
    {"{\"memory\": {\"size\": \"512M\"}}", "must be an integer"},
    {"{\"payload\": {\"kernel\": 5}}", "must be a string"},
    {"{\"payload\": {\"kernel\": \"a\\u0000b\"}}", "NUL"},
    {"{\"serial\": {\"mode\": \"Socket\"}}", "'serial.mode' value 'Socket' is unsupported"},
    {"{\"serial\": {\"mode\": \"Serial\"}}", "Off, Null, Tty or File"},
    {"{\"serial\": {\"mode\": \"File\"}}", "serial.file"},
    {"{\"serial\": {\"mode\": \"Tty\", \"file\": \"/x\"}}", "serial.file"},
    {"{\"vnvme\": {\"path\": \"/d\"}}", "must be an array"},
    {"{\"vnvme\": [5]}", "must be an object"},
    {"{\"vnvme\": [{\"size\": 5}]}", "exactly one of"},
    {"{\"vnvme\": [{\"path\": \"/d\", \"ssd\": \"s\"}]}", "exactly one of"},
    {"{\"vnvme\": [{\"path\": \"/d\", \"mode\": \"fast\"}]}", "emulate, passthrough"},
    {"{\"vnvme\": [{\"path\": \"/d\", \"readonly\": 1}]}", "true or false"},
    {"{\"vnvme\": [{\"path\": \"/d\", \"num_queues\": 65536}]}", "num_queues"},
    {"{\"vnvme\": [{\"path\": \"/d\", \"num_queues\": -1}]}", "num_queues"},
    {"{\"vnvme\": [{\"path\": \"/d\", \"vol\": \"v\"}]}", "needs 'ssd'"},
    {"{\"vnvme\": [{\"path\": \"/d\", \"serial\": \"123456789012345678901\"}]}", "max 20"},
    {"{\"vnvme\": [{\"path\": \"/a\", \"id\": \"x\"}, {\"path\": \"/b\", \"id\": \"x\"}]}",
     "used twice"},
    {"{\"vnvme\": [{\"path\": \"/a\"}, {\"path\": \"/b\"}, {\"path\": \"/c\"},"
     " {\"path\": \"/d\"}, {\"path\": \"/e\"}, {\"path\": \"/f\"}, {\"path\": \"/g\"},"
     " {\"path\": \"/h\"}, {\"path\": \"/i\"}]}",
     "max 8"},
    {"{\"memory\": {\"size\": 1}, \"memory\": {\"size\": 2}}", "malformed JSON"},
};

START_TEST(test_create_bad_config)
{
	ck_assert_int_eq(put("vm.create", bad_configs[_i].body), 400);
	ck_assert_msg(strstr(error_text(), bad_configs[_i].needle) != NULL,
		      "body %s: error '%s' does not mention '%s'", bad_configs[_i].body,
		      error_text(), bad_configs[_i].needle);
	ck_assert_ptr_null(vmm.vm);
	ck_assert_int_eq(get("vm.info"), 404);
}
END_TEST

START_TEST(test_create_errors)
{
	ck_assert_int_eq(put("vm.create", NULL), 400);
	ck_assert_ptr_nonnull(strstr(error_text(), "needs a JSON body"));
	/* the VM layer's own failure comes back with its message, and no VM is kept */
	ck_assert_int_eq(put("vm.create", "{\"payload\": {\"kernel\": \"/nonexistent\"}}"), 400);
	ck_assert_ptr_nonnull(strstr(error_text(), "/nonexistent"));
	ck_assert_ptr_null(vmm.vm);
	/* one VM at most */
	ck_assert_int_eq(put("vm.create", good_config), 204);
	ck_assert_int_eq(put("vm.create", good_config), 409);
	ck_assert_ptr_nonnull(strstr(error_text(), "already exists"));
	ck_assert_uint_eq(fake_live, 1);
}
END_TEST

START_TEST(test_no_vm)
{
	static const char *const puts[] = {"vm.boot",	  "vm.pause",  "vm.resume",
					   "vm.shutdown", "vm.reboot", NULL};

	for (int i = 0; puts[i]; i++) {
		ck_assert_int_eq(put(puts[i], NULL), 404);
		ck_assert_ptr_nonnull(strstr(error_text(), "no VM"));
	}
	ck_assert_int_eq(get("vm.info"), 404);
	ck_assert_int_eq(get("vm.counters"), 404);
	ck_assert_int_eq(put("vm.add-vnvme", "{\"path\": \"/d\"}"), 404);
	ck_assert_int_eq(put("vm.remove-device", "{\"id\": \"nvme0\"}"), 404);
	ck_assert_int_eq(put("vm.delete", NULL), 204);
}
END_TEST

START_TEST(test_lifecycle)
{
	ck_assert_int_eq(put("vm.create", good_config), 204);
	ck_assert_int_eq(put("vm.pause", NULL), 405);
	ck_assert_ptr_nonnull(strstr(error_text(), "Created"));
	ck_assert_int_eq(put("vm.resume", NULL), 405);
	ck_assert_int_eq(put("vm.shutdown", NULL), 405);
	ck_assert_int_eq(put("vm.reboot", NULL), 405);
	ck_assert_str_eq(state(), "Created");

	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_str_eq(state(), "Running");
	ck_assert_int_eq(put("vm.boot", NULL), 405);
	ck_assert_int_eq(put("vm.resume", NULL), 405);
	ck_assert_str_eq(state(), "Running");

	ck_assert_int_eq(put("vm.pause", NULL), 204);
	ck_assert_str_eq(state(), "Paused");
	ck_assert_int_eq(put("vm.pause", NULL), 405);
	ck_assert_int_eq(put("vm.boot", NULL), 405);
	ck_assert_str_eq(state(), "Paused");

	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert_str_eq(state(), "Running");
	ck_assert_int_eq(put("vm.reboot", NULL), 204);
	ck_assert_str_eq(state(), "Running");
	/* a paused VM reboots too and comes back Running */
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	ck_assert_int_eq(put("vm.reboot", NULL), 204);
	ck_assert_str_eq(state(), "Running");

	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
	ck_assert_str_eq(state(), "Shutdown");
	ck_assert_int_eq(put("vm.shutdown", NULL), 405);
	ck_assert_int_eq(put("vm.pause", NULL), 405);
	ck_assert_int_eq(put("vm.resume", NULL), 405);
	ck_assert_str_eq(state(), "Shutdown");

	/* boot after shutdown rebuilds the VM from the same config */
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_str_eq(state(), "Running");
	ck_assert_uint_eq(vmm.vm->cfg.nvnvme, 2);
	ck_assert_uint_eq(fake_live, 1);

	ck_assert_int_eq(put("vm.delete", NULL), 204);
	ck_assert_ptr_null(vmm.vm);
	ck_assert_uint_eq(fake_live, 0);
	ck_assert_int_eq(get("vm.info"), 404);
	ck_assert_int_eq(put("vm.create", good_config), 204);
	ck_assert_str_eq(state(), "Created");
}
END_TEST

START_TEST(test_delete_paused)
{
	ck_assert_int_eq(put("vm.create", good_config), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	ck_assert_int_eq(put("vm.delete", NULL), 204);
	ck_assert_ptr_null(vmm.vm);
	ck_assert_uint_eq(fake_live, 0);
}
END_TEST

START_TEST(test_counters)
{
	json_t *d;

	ck_assert_int_eq(put("vm.create", good_config), 204);
	ck_assert_int_eq(get("vm.counters"), 200);
	d = json_object_get(answer, "nvme0");
	ck_assert(json_is_object(d));
	ck_assert_int_eq(json_integer_value(json_object_get(d, "read_ops")), 5);
	ck_assert_int_eq(json_integer_value(json_object_get(d, "write_bytes")), 4096);
	ck_assert_int_eq(json_integer_value(json_object_get(d, "doorbells")), 7);
	ck_assert(json_is_integer(json_object_get(d, "mmio_exits")));
	ck_assert_uint_eq(json_object_size(answer), 1);
}
END_TEST

START_TEST(test_hotplug)
{
	ck_assert_int_eq(put("vm.create", good_config), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_int_eq(put("vm.add-vnvme", "{\"path\": \"/tmp/x.img\"}"), 501);
	/* the first free default id was chosen: nvme0 is taken by the config */
	ck_assert_ptr_nonnull(strstr(error_text(), "nvme1"));
	ck_assert_int_eq(put("vm.add-vnvme", "{\"path\": \"/x\", \"bad\": 1}"), 400);
	ck_assert_ptr_nonnull(strstr(error_text(), "'vnvme.bad'"));
	ck_assert_int_eq(put("vm.add-vnvme", "{"), 400);
	ck_assert_int_eq(put("vm.add-vnvme", NULL), 400);
	ck_assert_int_eq(put("vm.remove-device", "{\"id\": \"nvme0\"}"), 501);
	ck_assert_ptr_nonnull(strstr(error_text(), "nvme0"));
	ck_assert_int_eq(put("vm.remove-device", "{\"id\": \"nvme0\", \"force\": true}"), 400);
	ck_assert_ptr_nonnull(strstr(error_text(), "'force'"));
	ck_assert_int_eq(put("vm.remove-device", "{\"id\": 3}"), 400);
	ck_assert_int_eq(put("vm.remove-device", "{\"id\": \"\"}"), 400);
	ck_assert_int_eq(put("vm.remove-device", "[]"), 400);
	/* a paused VM takes hotplug requests too (its guest acts on them after vm.resume) */
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	ck_assert_int_eq(put("vm.add-vnvme", "{\"path\": \"/tmp/x.img\"}"), 501);
	ck_assert_int_eq(put("vm.remove-device", "{\"id\": \"nvme0\"}"), 501);
	ck_assert_str_eq(state(), "Paused");
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
	ck_assert_int_eq(put("vm.add-vnvme", "{\"path\": \"/tmp/x.img\"}"), 405);
	ck_assert_int_eq(put("vm.remove-device", "{\"id\": \"nvme0\"}"), 405);
}
END_TEST

/* A VM not booted yet has no guest to tell: hotplug waits for vm.boot. */
START_TEST(test_hotplug_needs_boot)
{
	fake_hotplug_ok = true;
	ck_assert_int_eq(put("vm.add-vnvme", "{\"path\": \"/tmp/x.img\"}"), 404);
	ck_assert_int_eq(put("vm.create", good_config), 204);
	ck_assert_int_eq(put("vm.add-vnvme", "{\"path\": \"/tmp/x.img\"}"), 405);
	ck_assert_int_eq(put("vm.remove-device", "{\"id\": \"nvme0\"}"), 405);
	ck_assert_ptr_nonnull(strstr(error_text(), "Created"));
	fake_hotplug_ok = false;
}
END_TEST

/* The body Kata's generated client sends for an initrd sandbox: its constructors fill every
 * field with cloud-hypervisor's defaults, plus a key from an older schema (sgx_epc). */
static const char *kata_config =
    "{\"cpus\": {\"boot_vcpus\": 1, \"max_vcpus\": 4, \"kvm_hyperv\": false, \"nested\": true,"
    "           \"topology\": {\"threads_per_core\": 1, \"cores_per_die\": 4,"
    "                          \"dies_per_package\": 1, \"packages\": 1}},"
    " \"memory\": {\"size\": 134217728, \"hotplug_size\": 2147483648, \"mergeable\": false,"
    "             \"hotplug_method\": \"Acpi\", \"shared\": true, \"hugepages\": false,"
    "             \"prefault\": false, \"thp\": true},"
    " \"payload\": {\"kernel\": \"/boot/vmlinux\", \"initramfs\": \"/boot/kata.initrd\","
    "              \"cmdline\": \"panic=1 no_timer_check noreplace-smp quiet\"},"
    " \"rng\": {\"src\": \"/dev/urandom\", \"iommu\": false},"
    " \"serial\": {\"mode\": \"Off\", \"iommu\": false},"
    " \"console\": {\"mode\": \"Off\", \"iommu\": false},"
    " \"platform\": {\"num_pci_segments\": 2},"
    " \"iommu\": false, \"watchdog\": false, \"pvpanic\": false, \"landlock_enable\": false,"
    " \"disks\": [], \"net\": null, \"fs\": [], \"pmem\": [], \"devices\": [],"
    " \"sgx_epc\": null}";

START_TEST(test_kata_config)
{
	json_t *cfg, *mem, *pay;
	char *dump;

	ck_assert_int_eq(put("vm.create", kata_config), 204);
	ck_assert_uint_eq(vmm.vm->cfg.cpus, 1);
	ck_assert_uint_eq(vmm.vm->cfg.max_cpus, 4);
	ck_assert_str_eq(vmm.vm->cfg.initramfs, "/boot/kata.initrd");
	ck_assert_int_eq(vmm.vm->cfg.serial, SERIAL_OFF);
	ck_assert_int_eq(get("vm.info"), 200);
	cfg = json_object_get(answer, "config");
	mem = json_object_get(cfg, "memory");
	pay = json_object_get(cfg, "payload");
	ck_assert_int_eq(json_integer_value(json_object_get(mem, "size")), 134217728);
	/* no hotplug region: left out, so Kata's memory resize stays a no-op */
	ck_assert_ptr_null(json_object_get(mem, "hotplug_size"));
	ck_assert(json_is_true(json_object_get(mem, "shared")));
	ck_assert_str_eq(json_string_value(json_object_get(pay, "initramfs")), "/boot/kata.initrd");
	ck_assert_str_eq(
	    json_string_value(json_object_get(json_object_get(cfg, "console"), "mode")), "Off");
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(cfg, "rng"), "src")),
			 "/dev/urandom");
	ck_assert_int_eq(json_integer_value(
			     json_object_get(json_object_get(cfg, "platform"), "num_pci_segments")),
			 2);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(
		json_object_get(json_object_get(cfg, "cpus"), "topology"), "cores_per_die")),
	    4);
	ck_assert_ptr_null(json_object_get(cfg, "sgx_epc"));
	/* vm.info's config is itself a body vm.create takes, to the same VM */
	dump = json_dumps(cfg, JSON_COMPACT);
	struct vm_config before = vmm.vm->cfg;
	ck_assert_int_eq(put("vm.delete", NULL), 204);
	ck_assert_int_eq(put("vm.create", dump), 204);
	free(dump);
	ck_assert_mem_eq(&before, &vmm.vm->cfg, sizeof(before));
}
END_TEST

/* Absent options are left out instead of null (the schema has plain strings there). */
START_TEST(test_info_no_nulls)
{
	const char *k;
	json_t *v, *o;

	ck_assert_int_eq(put("vm.create", "{\"payload\": {\"kernel\": \"/k\"},"
					  " \"vnvme\": [{\"path\": \"/d\"}]}"),
			 204);
	ck_assert_int_eq(get("vm.info"), 200);
	o = json_object_get(answer, "config");
	ck_assert_ptr_null(json_object_get(json_object_get(o, "payload"), "initramfs"));
	ck_assert_ptr_null(json_object_get(json_object_get(o, "serial"), "file"));
	json_object_foreach(json_object_get(o, "payload"), k, v) ck_assert(!json_is_null(v));
	json_object_foreach(json_array_get(json_object_get(o, "vnvme"), 0), k, v)
	    ck_assert_msg(!json_is_null(v), "vnvme field %s is null", k);
	ck_assert_ptr_null(json_object_get(json_array_get(json_object_get(o, "vnvme"), 0), "ssd"));
}
END_TEST

START_TEST(test_resize)
{
	ck_assert_int_eq(put("vm.resize", "{\"desired_vcpus\": 1}"), 404);
	ck_assert_int_eq(put("vm.create", kata_config), 204);
	/* what already holds is a no-op, in Created and Running */
	ck_assert_int_eq(put("vm.resize", "{\"desired_vcpus\": 1, \"desired_ram\": 134217728}"),
			 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_int_eq(put("vm.resize", "{\"desired_vcpus\": 1}"), 204);
	ck_assert_int_eq(put("vm.resize", "{\"desired_balloon\": 0, \"unknown\": 1}"), 204);
	ck_assert_int_eq(put("vm.resize", "{\"desired_vcpus\": 2}"), 501);
	ck_assert_ptr_nonnull(strstr(error_text(), "vCPU hotplug"));
	ck_assert_int_eq(put("vm.resize", "{\"desired_vcpus\": 5}"), 400);
	ck_assert_ptr_nonnull(strstr(error_text(), "max_vcpus 4"));
	ck_assert_int_eq(put("vm.resize", "{\"desired_vcpus\": 0}"), 400);
	ck_assert_int_eq(put("vm.resize", "{\"desired_ram\": 268435456}"), 501);
	ck_assert_ptr_nonnull(strstr(error_text(), "memory hotplug"));
	ck_assert_int_eq(put("vm.resize", "{\"desired_ram\": 1048576}"), 400);
	ck_assert_ptr_nonnull(strstr(error_text(), "cannot shrink"));
	ck_assert_int_eq(put("vm.resize", "{\"desired_balloon\": 4096}"), 400);
	ck_assert_int_eq(put("vm.resize", "{\"desired_vcpus\": \"2\"}"), 400);
	ck_assert_int_eq(put("vm.resize", "[1]"), 400);
	ck_assert_int_eq(put("vm.resize", NULL), 400);
	ck_assert_uint_eq(vmm.vm->cfg.cpus, 1);
	ck_assert_str_eq(state(), "Running");
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
	ck_assert_int_eq(put("vm.resize", "{\"desired_vcpus\": 1}"), 405);
}
END_TEST

/* cloud-hypervisor endpoints lvmm lacks: 404 without a VM as there, then 501 naming why. */
START_TEST(test_not_implemented)
{
	static const char *const eps[] = {"vm.coredump", "vm.power-button", NULL};

	for (int i = 0; eps[i]; i++)
		ck_assert_int_eq(put(eps[i], "{}"), 404);
	/* snapshots: no VM to save; the fake VMM cannot restore */
	ck_assert_int_eq(put("vm.snapshot", "{}"), 404);
	ck_assert_int_eq(put("vm.restore", "{\"source_url\": \"file:///tmp\"}"), 501);
	ck_assert_int_eq(put("vm.create", good_config), 204);
	/* a VM that is not paused is not saved; a VMM with a VM restores nothing */
	ck_assert_int_eq(put("vm.snapshot", "{\"destination_url\": \"file:///tmp\"}"), 405);
	ck_assert_ptr_nonnull(strstr(error_text(), "Created"));
	ck_assert_int_eq(put("vm.restore", "{\"source_url\": \"file:///tmp\"}"), 409);
	for (int i = 0; eps[i]; i++) {
		ck_assert_int_eq(put(eps[i], "{}"), 501);
		ck_assert_ptr_nonnull(strstr(error_text(), eps[i]));
		ck_assert_ptr_nonnull(strstr(error_text(), "not implemented"));
	}
	ck_assert_int_eq(put("vm.nonsense", "{}"), 404);
	ck_assert_str_eq(state(), "Created");
}
END_TEST

/* Live migration with a VMM that has no migration ops (the fake): 404 without a VM for the
 * sender, 501 otherwise; the receiver needs no VM and refuses when there is one. */
START_TEST(test_migration_not_here)
{
	ck_assert_int_eq(put("vm.send-migration", "{\"destination_url\": \"unix:/tmp/x\"}"), 404);
	ck_assert_int_eq(put("vm.receive-migration", "{\"receiver_url\": \"unix:/tmp/x\"}"), 501);
	ck_assert_int_eq(put("vm.create", good_config), 204);
	ck_assert_int_eq(put("vm.send-migration", "{\"destination_url\": \"unix:/tmp/x\"}"), 405);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_int_eq(put("vm.send-migration", "{\"destination_url\": \"unix:/tmp/x\"}"), 501);
	ck_assert_int_eq(put("vm.receive-migration", "{\"receiver_url\": \"unix:/tmp/x\"}"), 409);
	ck_assert_ptr_nonnull(strstr(error_text(), "already exists"));
}
END_TEST

/* vm.add-* answers cloud-hypervisor's PciDeviceInfo, bdf as Kata parses it (0000:00:SS.0). */
START_TEST(test_add_pci_device_info)
{
	fake_hotplug_ok = true;
	ck_assert_int_eq(put("vm.create", good_config), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_int_eq(put("vm.add-vnvme", "{\"path\": \"/tmp/x.img\"}"), 200);
	/* good_config holds nvme0 and "fast": the first free id, third device */
	ck_assert_str_eq(json_string_value(json_object_get(answer, "id")), "nvme1");
	ck_assert_str_eq(json_string_value(json_object_get(answer, "bdf")), "0000:00:05.0");
	ck_assert_uint_eq(json_object_size(answer), 2);
	ck_assert_int_eq(put("vm.add-vnvme", "{\"id\": \"x\", \"path\": \"/tmp/y.img\"}"), 200);
	ck_assert_str_eq(json_string_value(json_object_get(answer, "bdf")), "0000:00:06.0");
	/* an id in use is the client's mistake */
	ck_assert_int_eq(put("vm.add-vnvme", "{\"id\": \"x\", \"path\": \"/tmp/z.img\"}"), 400);
	ck_assert_ptr_nonnull(strstr(error_text(), "x"));
	/* removal: 204 once done, the device leaves vm.info; an unknown id is 404 */
	ck_assert_int_eq(put("vm.remove-device", "{\"id\": \"x\"}"), 204);
	ck_assert_int_eq(put("vm.remove-device", "{\"id\": \"x\"}"), 404);
	ck_assert_ptr_nonnull(strstr(error_text(), "x"));
	ck_assert_int_eq(get("vm.info"), 200);
	ck_assert_uint_eq(
	    json_array_size(json_object_get(json_object_get(answer, "config"), "vnvme")), 3);
	fake_hotplug_ok = false;
}
END_TEST

/* cloud-hypervisor's DeviceConfig in vm.create: kept, listed by vm.info, fed back the same; a
 * VM layer without passthrough answers vm.add-device 500. */
START_TEST(test_devices_config)
{
	json_t *devs, *d;

	ck_assert_int_eq(put("vm.create",
			     "{\"payload\": {\"kernel\": \"/boot/vmlinux\"},"
			     " \"devices\": [{\"path\": \"/sys/bus/pci/devices/0000:01:00.0\","
			     " \"id\": \"gpu0\", \"iommu\": false, \"pci_segment\": 0},"
			     " {\"path\": \"/sys/bus/pci/devices/0000:02:00.0\"}]}"),
			 204);
	ck_assert_uint_eq(vmm.vm->cfg.ndevices, 2);
	ck_assert_str_eq(vmm.vm->cfg.devices[0].path, "/sys/bus/pci/devices/0000:01:00.0");
	ck_assert_int_eq(get("vm.info"), 200);
	devs = json_object_get(json_object_get(answer, "config"), "devices");
	ck_assert_uint_eq(json_array_size(devs), 2);
	d = json_array_get(devs, 0);
	ck_assert_str_eq(json_string_value(json_object_get(d, "id")), "gpu0");
	ck_assert(json_is_false(json_object_get(d, "iommu")));
	d = json_array_get(devs, 1);
	ck_assert_str_eq(json_string_value(json_object_get(d, "id")), "dev1");
	ck_assert_str_eq(json_string_value(json_object_get(d, "path")),
			 "/sys/bus/pci/devices/0000:02:00.0");
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_int_eq(put("vm.add-device", "{\"path\": \"/sys/bus/pci/devices/0000:03:00.0\"}"),
			 500);
	ck_assert_ptr_nonnull(strstr(error_text(), "vm.add-device"));
}
END_TEST

START_TEST(test_vmm_shutdown)
{
	ck_assert_int_eq(put("vm.create", good_config), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_int_eq(put("vmm.shutdown", NULL), 204);
	ck_assert(vmm.shutdown);
	/* an API VM is left to api_vmm_release() (teardown checks it is destroyed) */
	ck_assert_ptr_nonnull(vmm.vm);
}
END_TEST

START_TEST(test_external_vm)
{
	struct vm *vm = calloc(1, sizeof(*vm));

	/* a command-line VM: the API stops it but never destroys it */
	fake_defaults(&vm->cfg);
	vm->state = VM_RUNNING;
	api_vmm_init(&vmm, &fake_ops, vm);
	ck_assert_int_eq(put("vm.create", good_config), 409);
	ck_assert_int_eq(put("vm.boot", NULL), 405);
	ck_assert_int_eq(put("vm.delete", NULL), 204);
	ck_assert_int_eq(vm->state, VM_SHUTDOWN);
	ck_assert_ptr_eq(vmm.vm, vm);
	ck_assert_int_eq(put("vm.boot", NULL), 405);
	api_vmm_release(&vmm);
	ck_assert_ptr_eq(vmm.vm, vm);

	vm->state = VM_PAUSED;
	ck_assert_int_eq(put("vmm.shutdown", NULL), 204);
	ck_assert_int_eq(vm->state, VM_SHUTDOWN);
	vmm.vm = NULL;
	free(vm);
}
END_TEST

/* ---- files a client names: real checks (fsutil) in a scratch directory ---- */

static char fdir[64], fout[64];
static struct api_vm_ops file_ops;

static void files_setup(void)
{
	char p[256];

	setup();
	file_ops = fake_ops;
	file_ops.check_path = fsutil_check;
	vmm.ops = &file_ops;
	testutil_mkdtemp(fdir, sizeof(fdir), "/tmp/lvmm-allowed-");
	testutil_mkdtemp(fout, sizeof(fout), "/tmp/lvmm-outside-");
	snprintf(p, sizeof(p), "%s/vmlinux", fdir);
	testutil_write_file(p, "ELF", 3, 0644);
	snprintf(p, sizeof(p), "%s/secret", fout);
	testutil_write_file(p, "keep", 4, 0644);
	ck_assert_int_eq(testutil_system("cd %s && ln -s vmlinux klink && mkfifo fifo && "
					 "ln -s %s ldir && mkdir sub && ln -s %s/secret out.log",
					 fdir, fout, fout),
			 0);
	vmm.allowed_dir = fdir;
}

static void files_teardown(void)
{
	teardown();
	testutil_rmtree(fdir);
	testutil_rmtree(fout);
}

static int create_with(const char *kernel, const char *serial_file)
{
	char body[1024];

	if (serial_file)
		snprintf(body, sizeof(body),
			 "{\"payload\": {\"kernel\": \"%s\"}, \"serial\": {\"mode\": \"File\", "
			 "\"file\": \"%s\"}}",
			 kernel, serial_file);
	else
		snprintf(body, sizeof(body), "{\"payload\": {\"kernel\": \"%s\"}}", kernel);
	return put("vm.create", body);
}

START_TEST(test_files_refused)
{
	char k[256], p[256];
	double t0 = testutil_now_s();

	snprintf(k, sizeof(k), "%s/vmlinux", fdir);
	snprintf(p, sizeof(p), "%s/klink", fdir);
	ck_assert_int_eq(create_with(p, NULL), 400);
	ck_assert_ptr_nonnull(strstr(error_text(), "symbolic link"));
	/* a FIFO answers at once (nothing opens it for real) */
	snprintf(p, sizeof(p), "%s/fifo", fdir);
	ck_assert_int_eq(create_with(p, NULL), 400);
	ck_assert_ptr_nonnull(strstr(error_text(), "FIFO"));
	ck_assert_int_eq(create_with(k, p), 400);
	ck_assert_ptr_nonnull(strstr(error_text(), "FIFO"));
	ck_assert_double_lt(testutil_now_s() - t0, 2.0);
	/* a symlink as the serial file (it would have truncated its target) */
	snprintf(p, sizeof(p), "%s/out.log", fdir);
	ck_assert_int_eq(create_with(k, p), 400);
	ck_assert_ptr_nonnull(strstr(error_text(), "symbolic link"));
	snprintf(p, sizeof(p), "%s/secret", fout);
	ck_assert_int_eq(create_with(k, p), 400);
	ck_assert_ptr_nonnull(strstr(error_text(), "beneath the allowed directory"));
	ck_assert_int_eq(create_with(p, NULL), 400);
	snprintf(p, sizeof(p), "%s/sub/../vmlinux", fdir);
	ck_assert_int_eq(create_with(p, NULL), 400);
	ck_assert_ptr_nonnull(strstr(error_text(), "'..'"));
	snprintf(p, sizeof(p), "%s/ldir/secret", fdir);
	ck_assert_int_eq(create_with(p, NULL), 400);
	ck_assert_ptr_nonnull(strstr(error_text(), "symbolic link"));
	ck_assert_int_eq(create_with("/dev/null", NULL), 400);
	/* nothing was created, nothing outside changed */
	ck_assert_ptr_null(vmm.vm);
	snprintf(p, sizeof(p), "%s/secret", fout);
	slurp_eq(p, "keep");
}
END_TEST

START_TEST(test_files_accepted)
{
	char k[256], p[256];
	const struct vm_config *cfg;

	snprintf(k, sizeof(k), "%s/vmlinux", fdir);
	snprintf(p, sizeof(p), "%s/sub/console.log", fdir);
	ck_assert_int_eq(create_with(k, p), 204);
	cfg = vmm.ops->get_config(vmm.vm);
	ck_assert_str_eq(cfg->allowed_dir, fdir);
	/* vm.create opened nothing: the serial file appears at boot */
	ck_assert_int_eq(access(p, F_OK), -1);
	ck_assert_int_eq(put("vm.delete", NULL), 204);
	/* relative names would mean lvmm's working directory to the loader: refused */
	ck_assert_int_eq(create_with("vmlinux", "sub/console.log"), 400);
	/* a disk image beneath it; one that escapes is refused */
	ck_assert_int_eq(create_with(k, NULL), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	snprintf(p, sizeof(p), "{\"path\": \"%s/ldir/disk.img\"}", fdir);
	ck_assert_int_eq(put("vm.add-vnvme", p), 400);
	ck_assert_ptr_nonnull(strstr(error_text(), "symbolic link"));
}
END_TEST

static Suite *api_router_suite(void)
{
	Suite *s = suite_create("api_router");
	TCase *tc = tcase_create("router"), *tf;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_ping);
	tcase_add_test(tc, test_unknown_endpoint);
	tcase_add_test(tc, test_wrong_verb);
	tcase_add_test(tc, test_create_and_info);
	tcase_add_test(tc, test_config_roundtrip);
	tcase_add_test(tc, test_create_defaults);
	tcase_add_loop_test(tc, test_create_bad_config, 0,
			    sizeof(bad_configs) / sizeof(bad_configs[0]));
	tcase_add_test(tc, test_create_errors);
	tcase_add_test(tc, test_no_vm);
	tcase_add_test(tc, test_lifecycle);
	tcase_add_test(tc, test_delete_paused);
	tcase_add_test(tc, test_counters);
	tcase_add_test(tc, test_hotplug);
	tcase_add_test(tc, test_hotplug_needs_boot);
	tcase_add_test(tc, test_kata_config);
	tcase_add_test(tc, test_info_no_nulls);
	tcase_add_test(tc, test_resize);
	tcase_add_test(tc, test_not_implemented);
	tcase_add_test(tc, test_migration_not_here);
	tcase_add_test(tc, test_add_pci_device_info);
	tcase_add_test(tc, test_devices_config);
	tcase_add_test(tc, test_vmm_shutdown);
	tcase_add_test(tc, test_external_vm);

	suite_add_tcase(s, tc);
	tf = tcase_create("files");
	tcase_add_checked_fixture(tf, files_setup, files_teardown);
	tcase_add_test(tf, test_files_refused);
	tcase_add_test(tf, test_files_accepted);
	suite_add_tcase(s, tf);
	return s;
}

int main(void)
{
	return testutil_run_suite(api_router_suite());
}
