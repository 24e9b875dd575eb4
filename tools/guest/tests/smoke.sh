# lvmm.test=smoke: system calls that busybox's shell makes without forking (open, read, write,
# stat, getpid). Sourced by /init; prints LVMM-SMOKE-OK and returns 0 when all of them work.
read -r osrelease </proc/sys/kernel/osrelease || return 1
read -r memline </proc/meminfo || return 1
echo "lvmm smoke $$" >/tmp/smoke || return 1
read -r back </tmp/smoke || return 1
[ "$back" = "lvmm smoke $$" ] || return 1
[ -c /dev/null ] || return 1
i=0
while [ $i -lt 1000 ]; do i=$((i + 1)); done
echo "LVMM-SMOKE-OK kernel=$osrelease $memline loop=$i"
return 0
