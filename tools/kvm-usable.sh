#!/usr/bin/env bash
# Exits 0 when this host can run VMs: /dev/kvm exists and this user may read and write it (the
# test testutil_kvm_usable() makes for the C test programs). Silent; callers say what they skip.
# Used by make demo, tests/run.sh (LVMM_TEST_NEEDS_KVM), tools/bench/smoke.sh and ci/test.sh.
[ -r /dev/kvm ] && [ -w /dev/kvm ]
