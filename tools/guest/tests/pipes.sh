# lvmm.test=pipes: short-lived processes in pipelines and command substitutions (each iteration
# runs four, nine processes in all), every result checked. Processes of a pipeline switch among
# themselves mid-way through glibc's string functions: on hosts where the guest kernel cannot
# switch the AVX state (docs/design.md, section 5) they read each other's registers and crash.
# lvmm.pipes=N sets the iterations (default 8). Prints LVMM-PIPES ok=N bad=M iterations=N and
# returns 0 when every result was right; smoke.sh sources it too.
n=8
read -r cmdline </proc/cmdline
for word in $cmdline; do
	case $word in
	lvmm.pipes=*) n=${word#lvmm.pipes=} ;;
	esac
done
ok=0
bad=0
check() {
	if [ "$2" = "$3" ]; then
		ok=$((ok + 1))
	else
		bad=$((bad + 1))
		echo "LVMM-PIPES-BAD $1 want=[$2] got=[$3]"
	fi
}
echo "lvmm pipes data" >/tmp/pipes.txt
# The reference digest without a pipe: the case that always worked.
md5sum </tmp/pipes.txt >/tmp/pipes.md5
read -r sum _ </tmp/pipes.md5
i=0
while [ "$i" -lt "$n" ]; do
	i=$((i + 1))
	check cpuinfo 1 "$(cat /proc/cpuinfo | grep -c -m1 '^flags')"
	check md5 "X $sum" "X $(md5sum </tmp/pipes.txt | cut -c1-32)"
	check tr "b$i" "$(echo "a$i" | cat | tr a b)"
	check wc 3 "$(printf 'x\ny\nz\n' | cat | wc -l)"
done
echo "LVMM-PIPES ok=$ok bad=$bad iterations=$n"
[ "$bad" -eq 0 ] && [ "$ok" -eq $((n * 4)) ]
