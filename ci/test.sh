#!/usr/bin/env bash
# What CI runs on a clean clone of main (as root, 2 cores): every suite through `make test`,
# which installs its Debian packages, builds lvmm and the test guest, and prints the totals.
set -euo pipefail
cd "$(dirname "$0")/.."
exec make test
