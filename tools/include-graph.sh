#!/usr/bin/env bash
# make include-check (part of make test): the include graph between the project's folders.
# Every #include "X" of a C, C++ or CUDA source is resolved as the compilers do (the file's own
# folder first, then the include roots below) and becomes an edge between two components:
#   include  vmm (with vmm/api)  vmm/platform  devices/*  host-kmod/*  gpu-fs  guest-driver
#   tools/*  tests/*
# It fails when the component graph has a cycle, or when an edge breaks a rule of
# docs/architecture.md ("Who may include what"). -v prints every edge with its count;
# --self-test runs the check on small trees with a known answer first (make include-check does).
# INCLUDE_GRAPH_ROOT=DIR checks that tree instead of this checkout.
set -u
self=$(realpath "$0")
cd "${INCLUDE_GRAPH_ROOT:-$(dirname "$0")/..}"
verbose=0
[ "${1:-}" = -v ] && verbose=1

if [ "${1:-}" = --self-test ]; then
	t=$(mktemp -d)
	trap 'rm -rf "$t"' EXIT
	fail=0
	# tree(NAME, FILE:INCLUDE...): files under $t/NAME, each including the others named
	tree() {
		local name=$1 spec f inc
		shift
		for spec in "$@"; do
			f=${spec%%:*} inc=${spec#*:}
			mkdir -p "$t/$name/$(dirname "$f")"
			[ -n "$inc" ] && echo "#include \"$inc\"" >>"$t/$name/$f"
			touch "$t/$name/$f"
		done
	}
	expect() {
		local name=$1 want=$2 out rc
		out=$(INCLUDE_GRAPH_ROOT="$t/$name" "$self" 2>&1)
		rc=$?
		if [ "$rc" != "$want" ] || ! grep -q "$3" <<<"$out"; then
			echo "include-check self-test: tree '$name' gave exit $rc (want $want):"
			sed 's/^/  /' <<<"$out"
			fail=1
		fi
	}
	tree good vmm/vm.c:nvme-lightiov/vnvme.h devices/nvme-lightiov/vnvme.h:pci.h \
		vmm/platform/pci.h:bus.h vmm/platform/bus.h: include/lightiov/nvme.h: \
		devices/nvme-lightiov/x.c:lightiov/nvme.h
	expect good 0 "no cycle, every edge allowed"
	tree forbidden devices/virtio/v.c:vm.h vmm/vm.h: host-kmod/softssd/s.c:vm.h
	expect forbidden 1 "devices/virtio may not include vmm"
	# devices/virtio -> devices/nvme-lightiov -> devices/virtio: allowed edges, but a loop
	tree cycle devices/virtio/v.h:nvme-lightiov/n.h devices/nvme-lightiov/n.h:virtio/w.h \
		devices/virtio/w.h:
	expect cycle 1 "include each other in a cycle"
	[ $fail = 0 ] || exit 1
	echo "include-check self-test: 3 trees, each judged as expected"
	exec "$self"
fi

roots=(include vmm/platform vmm devices host-kmod tests/lib gpu-fs/include gpu-fs/lib gpu-fs/gvdk)

component() {
	case "$1" in
	include/*) echo include ;;
	vmm/platform/*) echo vmm/platform ;;
	vmm/*) echo vmm ;;
	devices/*/*) echo "${1%/*}" ;;
	devices/*) echo devices ;;
	host-kmod/*/*) echo "${1%/*}" ;;
	gpu-fs/*) echo gpu-fs ;;
	guest-driver/*) echo guest-driver ;;
	tools/*/*) d=${1#tools/}; echo "tools/${d%%/*}" ;;
	tests/*/*) d=${1#tests/}; echo "tests/${d%%/*}" ;;
	*) echo "${1%%/*}" ;;
	esac
}

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	mapfile -t files < <(git ls-files '*.c' '*.h' '*.cc' '*.cu' '*.cuh')
else
	mapfile -t files < <(find . -path ./build -prune -o -type f \( -name '*.c' -o -name '*.h' \
		-o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) -print | sed 's|^\./||' | sort)
fi

declare -A edges=() comp=()
for f in "${files[@]}"; do
	from=$(component "$f")
	comp[$from]=1
	while IFS= read -r inc; do
		target=
		for r in "$(dirname "$f")" "${roots[@]}"; do
			if [ -f "$r/$inc" ]; then
				target=$(realpath -m --relative-to=. "$r/$inc")
				break
			fi
		done
		[ -n "$target" ] || continue
		to=$(component "$target")
		[ "$from" = "$to" ] && continue
		edges["$from $to"]=$((${edges["$from $to"]:-0} + 1))
	done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done

# The rules: a component may include only what its line allows (a pattern per component).
allowed() {
	case "$1" in
	include) return 1 ;;
	vmm/platform) return 1 ;;
	host-kmod/common | host-kmod/kmod | host-kmod/vfio) [[ $2 == include ]] ;;
	host-kmod/client) [[ $2 == include || $2 == host-kmod/common ]] ;;
	host-kmod/*) [[ $2 == include || $2 == host-kmod/* ]] ;;
	devices | devices/*) [[ $2 == include || $2 == vmm/platform || $2 == devices* || \
		$2 == host-kmod/client || $2 == host-kmod/vfio ]] ;;
	vmm) [[ $2 != tests/* && $2 != tools/* && $2 != gpu-fs ]] ;;
	gpu-fs) [[ $2 == include || $2 == host-kmod/client || $2 == host-kmod/common ]] ;;
	*) return 0 ;;
	esac
}

if [ $verbose = 1 ]; then
	for e in "${!edges[@]}"; do
		read -r from to <<<"$e"
		printf '  %-22s -> %-22s %s\n' "$from" "$to" "${edges[$e]}"
	done | sort
fi

# Each edge a rule forbids, with the include lines that make it.
bad=0
for e in $(for e in "${!edges[@]}"; do echo "${e/ /:}"; done | sort); do
	from=${e%%:*} to=${e#*:}
	allowed "$from" "$to" && continue
	bad=1
	echo "include-check: $from may not include $to:"
	for f in "${files[@]}"; do
		[ "$(component "$f")" = "$from" ] || continue
		while IFS=: read -r line inc; do
			for r in "$(dirname "$f")" "${roots[@]}"; do
				[ -f "$r/$inc" ] || continue
				t=$(realpath -m --relative-to=. "$r/$inc")
				[ "$(component "$t")" = "$to" ] && echo "  $f:$line: #include \"$inc\""
				break
			done
		done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
			sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1:\2/')
	done
done

# A cycle between components: tsort names the loop.
loop=$(for e in "${!edges[@]}"; do echo "$e"; done | tsort 2>&1 >/dev/null)
if [ -n "$loop" ]; then
	echo "include-check: the folders include each other in a cycle:"
	sed -n 's/^tsort: //p' <<<"$loop" | grep -v 'input contains a loop' | sed 's/^/  /'
	exit 1
fi
if [ "$bad" != 0 ]; then
	exit 1
fi
echo "include-check: ${#comp[@]} components, ${#edges[@]} include edges, no cycle, every edge allowed"
