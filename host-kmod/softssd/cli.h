/* `lvmm ssd`: the software SSD's command line (serve, stats, and vol, whose commands live in
 * vol_cli.c). */
#ifndef SOFTSSD_CLI_H
#define SOFTSSD_CLI_H

/* `lvmm ssd ...`; argv[0] is "ssd". Exit status: 0, 1 failed, 2 usage. */
int ssd_cli_main(int argc, char **argv);

/* `lvmm ssd vol ...` (vol_cli.c); argv[0] is "vol". Exit status: 0, 1 refused, 2 usage. */
int ssd_vol_cli(int argc, char **argv);

#endif
