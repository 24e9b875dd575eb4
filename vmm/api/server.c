/* REST API server on a Unix socket: placeholder entry points so `lvmm` links while the
 * HTTP server, router and client are being written. */
#include <stdio.h>

#include "api/api.h"

int api_vmm_main(const char *socket_path, struct vm *vm)
{
	(void)vm;
	fprintf(stderr, "lvmm: api socket %s: REST API not built yet\n", socket_path);
	return 1;
}
