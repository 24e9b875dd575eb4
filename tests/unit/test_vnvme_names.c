/* The SSD name of a vNVMe from the command line and from the API passes one check
 * (config_vnvme_name_ok): a plain name, never a path, so an API client cannot make lvmm open a
 * socket or a device of its choosing (issue 23, finding 3). */
#include <check.h>
#include <string.h>

#include "test_api_fake.h"
#include "testutil.h"

static const char *const hostile[] = {
    "/dev/null",
    "/tmp/x.sock",
    "../ssd0",
    "ssd0/../../x",
    "..",
    ".",
    "a b",
    "ssd\n0",
    "0123456789012345678901234567890123456789", /* past the backend's 31 characters */
};

START_TEST(test_cli_refuses)
{
	struct vnvme_config v;
	char arg[128], err[256];

	snprintf(arg, sizeof(arg), "%s:1G", hostile[_i]);
	ck_assert_int_ne(config_parse_vnvme(arg, &v, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "ssd name") || strstr(err, "vol") || strstr(err, "neither"),
		      "%s: %s", arg, err);
}
END_TEST

static struct api_vmm vmm;

static int put(const char *name, const char *body, char *err, size_t errlen)
{
	struct api_request req = {.method = HTTP_PUT};
	struct api_response resp;
	char *copy = strdup(body);
	int st;

	snprintf(req.path, sizeof(req.path), "/api/v1/%s", name);
	req.body = copy;
	req.body_len = strlen(copy);
	api_route(&vmm, &req, &resp);
	free(copy);
	st = resp.status;
	snprintf(err, errlen, "%s", resp.body ? resp.body : "");
	api_response_free(&resp);
	return st;
}

/* The JSON path took any string as the SSD name: now it answers 400 naming the field. */
START_TEST(test_api_refuses)
{
	json_t *o = json_pack("{s:{s:s}, s:[{s:s, s:I}]}", "payload", "kernel", "/k", "vnvme",
			      "ssd", hostile[_i], "size", (json_int_t)(1 << 20));
	char *body = json_dumps(o, 0), err[512];

	api_vmm_init(&vmm, &fake_ops, NULL);
	ck_assert_int_eq(put("vm.create", body, err, sizeof(err)), 400);
	ck_assert_msg(strstr(err, "vnvme[0].ssd") != NULL, "%s: %s", hostile[_i], err);
	ck_assert_ptr_null(vmm.vm);
	free(body);
	json_decref(o);
	api_vmm_release(&vmm);
}
END_TEST

/* Hot-add takes the same object: the same refusal, before the VM layer sees it. */
START_TEST(test_api_add_refuses)
{
	char err[512], body[256];

	api_vmm_init(&vmm, &fake_ops, NULL);
	ck_assert_int_eq(put("vm.create", "{\"payload\": {\"kernel\": \"/k\"}}", err, sizeof(err)),
			 204);
	ck_assert_int_eq(put("vm.boot", "{}", err, sizeof(err)), 204);
	snprintf(body, sizeof(body), "{\"ssd\": \"/dev/null\", \"size\": 1048576}");
	ck_assert_int_eq(put("vm.add-vnvme", body, err, sizeof(err)), 400);
	ck_assert_msg(strstr(err, "vnvme.ssd") != NULL, "%s", err);
	snprintf(body, sizeof(body), "{\"ssd\": \"ssd0\", \"vol\": \"../v\", \"size\": 1048576}");
	ck_assert_int_eq(put("vm.add-vnvme", body, err, sizeof(err)), 400);
	ck_assert_msg(strstr(err, "vnvme.vol") != NULL, "%s", err);
	ck_assert_uint_eq(vmm.vm->cfg.nvnvme, 0);
	api_vmm_release(&vmm);
}
END_TEST

/* config_validate, which the API's create runs too, holds the same line. */
START_TEST(test_validate_refuses)
{
	struct vm_config c;
	char err[256];

	config_defaults(&c);
	snprintf(c.kernel, sizeof(c.kernel), "/proc/self/exe"); /* a file that exists */
	c.nvnvme = 1;
	c.vnvme[0].mode = VNVME_ISOLATED;
	c.vnvme[0].size = 1 << 20;
	snprintf(c.vnvme[0].ssd, sizeof(c.vnvme[0].ssd), "%s", hostile[_i]);
	ck_assert_int_ne(config_validate(&c, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "ssd name") != NULL, "%s: %s", hostile[_i], err);
	snprintf(c.vnvme[0].ssd, sizeof(c.vnvme[0].ssd), "ssd0");
	ck_assert_int_eq(config_validate(&c, err, sizeof(err)), 0);
}
END_TEST

START_TEST(test_plain_names_pass)
{
	static const char *const ok[] = {"ssd0", "a", "lio0", "my_ssd-1.2", "..x"};
	struct vnvme_config v;
	char arg[64], err[256];

	for (unsigned i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		ck_assert(config_vnvme_name_ok(ok[i], strlen(ok[i]), CONFIG_SSD_NAME_MAX));
		snprintf(arg, sizeof(arg), "%s:1G", ok[i]);
		ck_assert_msg(config_parse_vnvme(arg, &v, err, sizeof(err)) == 0, "%s", err);
	}
}
END_TEST

static Suite *names_suite(void)
{
	Suite *s = suite_create("vnvme_names");
	TCase *tc = tcase_create("names");
	int n = (int)(sizeof(hostile) / sizeof(hostile[0]));

	tcase_add_loop_test(tc, test_cli_refuses, 0, n);
	tcase_add_loop_test(tc, test_api_refuses, 0, n);
	tcase_add_test(tc, test_api_add_refuses);
	tcase_add_loop_test(tc, test_validate_refuses, 0, n);
	tcase_add_test(tc, test_plain_names_pass);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(names_suite());
}
