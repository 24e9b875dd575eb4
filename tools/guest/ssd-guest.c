/* lvmm's softssd alone, linked static for the test guests (busybox and our static programs only):
 * `ssd-guest serve|stats|vol ...` is `lvmm ssd serve|stats|vol ...`. */
#include "softssd/cli.h"

int main(int argc, char **argv)
{
	return ssd_cli_main(argc, argv);
}
