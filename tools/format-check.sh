#!/usr/bin/env bash
# make format-check (part of make test): every C and CUDA source of the project is as clang-format
# writes it (.clang-format at the top; kernel code under host-kmod/kmod and guest-driver/module
# opts out and is held to checkpatch instead). Names each file that differs; make format fixes it.
set -u
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format-check: clang-format is not installed" >&2; exit 1; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh')
else
	mapfile -t files < <(find . -path ./build -prune -o -type f \( -name '*.c' -o -name '*.h' \
		-o -name '*.cu' -o -name '*.cuh' \) -print | sed 's|^\./||' | sort)
fi
bad=()
for f in "${files[@]}"; do
	clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
	echo "format-check: ${#bad[@]} of ${#files[@]} files differ from clang-format (make format):"
	printf '  %s\n' "${bad[@]}"
	exit 1
fi
echo "format-check: ${#files[@]} files as clang-format writes them ($(clang-format --version | sed 's/.*version //'))"
