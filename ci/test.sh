#!/usr/bin/env bash
# What CI runs on a clean clone of main (as root, 2 cores): every suite through `make test`,
# which installs its Debian packages, builds lvmm and the test guest, and prints the totals.
set -euo pipefail
cd "$(dirname "$0")/.."
# Without KVM the VM suites would only be skipped: on CI that is a failure, not a pass.
if ! tools/kvm-usable.sh; then
	echo "ci: /dev/kvm is not usable here: the VM suites would only be skipped" >&2
	exit 1
fi
exec make test
