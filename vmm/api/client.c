/* `lvmm api` client: placeholder so `lvmm` links while the real client is written. */
#include <stdio.h>

#include "api/api.h"

int api_client_main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "lvmm api: client not built yet\n");
	return 1;
}
