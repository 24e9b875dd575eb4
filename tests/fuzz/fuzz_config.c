/* libFuzzer target for the configuration parsers (vmm/config.c): sizes and --vnvme arguments
 * from arbitrary bytes, then whole-config validation of what they produced. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct vm_config c;
	char s[8192], err[256];
	uint64_t v;
	size_t n = size < sizeof(s) - 1 ? size : sizeof(s) - 1, half;

	memcpy(s, data, n);
	s[n] = 0;

	err[0] = 0;
	if (config_parse_size(s, &v, err, sizeof(err)) && !err[0])
		abort();

	config_defaults(&c);
	strcpy(c.kernel, "/dev/null");
	/* Two devices from the two halves of the input, so id clashes get exercised. */
	half = n / 2;
	if (config_parse_vnvme(s, &c.vnvme[0], err, sizeof(err)) == 0) {
		if (!memchr(c.vnvme[0].path, 0, sizeof(c.vnvme[0].path)) ||
		    !memchr(c.vnvme[0].serial, 0, sizeof(c.vnvme[0].serial)))
			abort();
		c.nvnvme = 1;
	}
	s[half] = 0;
	if (config_parse_vnvme(s, &c.vnvme[c.nvnvme], err, sizeof(err)) == 0)
		c.nvnvme++;
	if (n > 0)
		c.cpus = data[0];
	if (n > 1)
		c.max_cpus = data[1];
	if (n > 9)
		memcpy(&c.memory, data + 2, sizeof(c.memory));
	err[0] = 0;
	if (config_validate(&c, err, sizeof(err)) && !err[0])
		abort();
	return 0;
}
