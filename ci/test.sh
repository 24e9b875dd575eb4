#!/usr/bin/env bash
# What CI runs on a clean clone of main (as root, 2 cores): every suite through `make test`,
# which installs its Debian packages, builds lvmm and the test guest, and prints the totals.
# A runner without a usable /dev/kvm still runs every suite that needs no VM; the VM suites are
# counted as skipped, each with its reason, in the totals make test prints.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! tools/kvm-usable.sh; then
	echo "ci: /dev/kvm is not usable here: the suites that boot a VM will be skipped and counted" >&2
fi
exec make test
