/* gvdk: command-line tool that creates, inspects and verifies GVDK files.
 * Exit status 0 on success, 1 on any refusal, 2 on a usage error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gvdk.h"

static void gvdk_usage(void)
{
	fprintf(stderr,
		"usage: gvdk create FILE SIZE [--block-size 4K] [--device /dev/X] [--force]\n"
		"       gvdk inspect FILE\n"
		"       gvdk verify FILE\n");
}

static int gvdk_cmd_create(int argc, char **argv)
{
	struct gvdk_create_opts o = {0};
	char err[GVDK_ERRLEN] = "";
	uint64_t size, bs;
	int rc;

	if (argc < 2)
		return gvdk_usage(), 2;
	if (gvdk_parse_size(argv[1], &size)) {
		fprintf(stderr, "gvdk: size '%s' is not a number with an optional K/M/G/T suffix\n",
			argv[1]);
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--block-size") && i + 1 < argc) {
			if (gvdk_parse_size(argv[++i], &bs) || bs > GVDK_MAX_BLOCK) {
				fprintf(stderr, "gvdk: block size '%s' invalid\n", argv[i]);
				return 2;
			}
			o.block_size = (uint32_t)bs;
		} else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
			o.device = argv[++i];
		} else if (!strcmp(argv[i], "--force")) {
			o.force = 1;
		} else {
			fprintf(stderr, "gvdk: unknown option '%s'\n", argv[i]);
			return gvdk_usage(), 2;
		}
	}
	rc = gvdk_create(argv[0], size, &o, err);
	if (rc) {
		fprintf(stderr, "gvdk: %s\n", err);
		return 1;
	}
	printf("%s: %llu bytes of data in %u-byte blocks\n", argv[0], (unsigned long long)size,
	       o.block_size ? o.block_size : 4096);
	return 0;
}

static int gvdk_cmd_check(const char *path, int verbose)
{
	char err[GVDK_ERRLEN] = "";
	struct gvdk_map m;
	const struct gvdk_header *h = &m.hdr;
	int rc;

	rc = gvdk_load(path, &m, 0, err);
	if (rc) {
		fprintf(stderr, "gvdk: %s\n", err);
		return 1;
	}
	if (verbose) {
		uint64_t runs = 1;

		for (uint64_t b = 1; b < h->nblocks; b++)
			if (gvdk_lookup(&m, b) != gvdk_lookup(&m, b - 1) + h->block_size)
				runs++;
		printf("file:        %s\n", path);
		printf("version:     %u\n", h->version);
		printf("block size:  %u\n", h->block_size);
		printf("file size:   %llu\n", (unsigned long long)h->file_size);
		printf("data offset: %llu\n", (unsigned long long)h->data_offset);
		printf("data size:   %llu (%llu blocks)\n", (unsigned long long)h->data_size,
		       (unsigned long long)h->nblocks);
		printf("map:         %u L2 tables of %u entries, overhead %.3f%%\n", h->l2_tables,
		       h->per_l2, 100.0 * (double)h->data_offset / (double)h->data_size);
		printf("device:      %u:%u, partition start %llu\n", h->dev_major, h->dev_minor,
		       (unsigned long long)h->part_start);
		printf("inode:       %llu\n", (unsigned long long)h->ino);
		printf("extents:     %llu physically contiguous runs\n", (unsigned long long)runs);
		printf("first block: device offset %llu\n", (unsigned long long)gvdk_lookup(&m, 0));
	}
	printf("%s: ok (header, map checksums and a fresh FIEMAP agree)\n", path);
	gvdk_map_free(&m);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return gvdk_usage(), 2;
	if (!strcmp(argv[1], "create"))
		return gvdk_cmd_create(argc - 2, argv + 2);
	if (!strcmp(argv[1], "inspect"))
		return gvdk_cmd_check(argv[2], 1);
	if (!strcmp(argv[1], "verify"))
		return gvdk_cmd_check(argv[2], 0);
	gvdk_usage();
	return 2;
}
