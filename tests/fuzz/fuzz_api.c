/* libFuzzer target for the API's request path: raw bytes through the HTTP parser (in pieces,
 * as a socket delivers them) into the router and answer formatting, against a fake VM. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/test_api_fake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_answer(struct api_vmm *vmm, const struct api_request *req)
{
	struct api_response r;
	size_t len;
	char *out;

	api_route(vmm, req, &r);
	if (r.status < 200 || r.status > 599)
		abort();
	out = api_http_format(&r, true, &len);
	free(out);
	api_response_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const direct[] = {"vm.create", "vm.add-vnvme", "vm.remove-device"};
	struct api_vmm vmm;
	struct api_http h;
	size_t off = 0, step;

	api_vmm_init(&vmm, &fake_ops, NULL);
	/* First byte >= 0xf0: the rest is a JSON body handed straight to an endpoint, so the
	 * VmConfig mapping is reached without the fuzzer having to invent HTTP first. */
	if (size && data[0] >= 0xf0) {
		struct api_request req = {.method = HTTP_PUT};
		char *body = malloc(size);

		memcpy(body, data + 1, size - 1);
		body[size - 1] = 0;
		req.body = body;
		req.body_len = size - 1;
		/* a VM exists for the device endpoints */
		if (data[0] % 3) {
			struct api_request c = {.method = HTTP_PUT, .body = "{}", .body_len = 2};

			strcpy(c.path, "/api/v1/vm.create");
			fuzz_answer(&vmm, &c);
		}
		snprintf(req.path, sizeof(req.path), "/api/v1/%s", direct[data[0] % 3]);
		fuzz_answer(&vmm, &req);
		free(body);
		api_vmm_release(&vmm);
		return 0;
	}

	/* The low bits of the first byte choose the read size, as a socket splits data. */
	step = size ? (data[0] & 0x3f) + 1 : 1;
	api_http_init(&h);
	for (;;) {
		size_t chunk = size - off < step ? size - off : step, n;

		n = api_http_parse(&h, (const char *)data + off, chunk);
		if (n > chunk)
			abort();
		off += n;
		if (h.error_status) {
			if (h.error_status < 400 || h.error_status > 599)
				abort();
			break;
		}
		if (h.ready) {
			if (h.req.body && h.req.body[h.req.body_len])
				abort(); /* the body must stay NUL-terminated */
			fuzz_answer(&vmm, &h.req);
			api_http_next(&h);
			continue;
		}
		if (off == size) {
			api_http_parse(&h, NULL, 0); /* end of input */
			break;
		}
		if (!n && chunk)
			break; /* the parser refuses more: same as the server's guard */
	}
	api_http_free(&h);
	api_vmm_release(&vmm);
	return 0;
}
