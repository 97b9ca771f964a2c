#!/usr/bin/env bash
# tests/lint/lint_map_selftest.sh: lint_map.sh finds each kind of breach it exists for, in a small
# made-up tree, and passes the real one.
# usage: lint_map_selftest.sh SOURCE_DIR
set -u
src=$1
lint="$src/tests/lint/lint_map.sh"
if ! git -C "$src" rev-parse --git-dir > /dev/null 2>&1; then
  echo "not a git checkout: lint_map reads the tracked files (skipped)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
git init -q .
mkdir -p kernels/cpu kernels/cuda engine storage console/tui/pure console/cmd
printf '// kernels/cpu/a: a kernel\n#include "engine/x.h"\n' > kernels/cpu/a.c                 # a floor up
printf '// kernels/cuda/b: across\n#include "kernels/cpu/a.h"\n' > kernels/cuda/b.cu            # cpu <-> cuda
printf '// kernels/cpu/a: the header\n' > kernels/cpu/a.h
printf '// engine/y: named wrong\n' > engine/x.h                                             # a label
printf '// engine/z: see engine/gone.c\n' > engine/z.c                                        # a dead path
printf '// storage/w: writes\nvoid f(void) { rename("a", "b"); }\n' > storage/w.c              # the one writer
printf '// console/tui/pure/p: pure\n#include <curses.h>\n#include "console/tui/t.h"\n' > console/tui/pure/p.c
printf '// console/tui/t: a screen\n#include "console/cmd/c.h"\n' > console/tui/t.h             # up the levels
printf '// console/cmd/c: a command\n' > console/cmd/c.h
git add -A
out=$(bash "$lint" . 2>&1)
status=$?
failed=0
for want in "kernels/cpu/a.c includes engine/x.h: a floor up" "kernels/cuda/b.cu includes kernels/cpu/a.h: across" \
            "engine/x.h: its first comment names engine/y" "engine/z.c names engine/gone.c" \
            "storage/w.c:2 calls rename or fsync" "console/tui/pure/p.c includes curses" \
            "console/tui/pure/p.c includes console/tui/t.h: up the console's levels" \
            "console/tui/t.h includes console/cmd/c.h: up the console's levels" "lint_map: 9 breaches"; do
  grep -qF "$want" <<< "$out" || { echo "FAIL: not found: $want"; failed=1; }
done
[ $status -eq 1 ] || { echo "FAIL: exit $status on a tree with breaches"; failed=1; }
bash "$lint" "$src" > real.txt 2>&1 || { echo "FAIL: the tree itself:"; cat real.txt; failed=1; }
[ $failed -eq 0 ] && echo "lint_map: 9 of 9 planted breaches found; the tree has none"
exit $failed
