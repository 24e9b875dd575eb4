# lvmm.test=smoke: system calls that busybox's shell makes without forking (open, read, write,
# stat, getpid), then the pipelines of pipes.sh. Sourced by /init; prints LVMM-SMOKE-OK and
# returns pipes.sh's status.
read -r osrelease </proc/sys/kernel/osrelease || return 1
read -r memline </proc/meminfo || return 1
echo "lvmm smoke $$" >/tmp/smoke || return 1
read -r back </tmp/smoke || return 1
[ "$back" = "lvmm smoke $$" ] || return 1
[ -c /dev/null ] || return 1
i=0
while [ $i -lt 1000 ]; do i=$((i + 1)); done
echo "LVMM-SMOKE-OK kernel=$osrelease $memline loop=$i"
# Then processes that fork and exec: pipelines and command substitutions (pipes.sh).
. /lvmm-tests/pipes.sh
