#!/usr/bin/env bash
# `pptrain train` end to end on the committed English corpus: the loss falls, two runs with
# the same seed print bitwise the same losses (data order and init depend only on the
# seed), and another seed changes them.
# usage: cli_train_smoke.sh PPTRAIN SOURCE_DIR
set -u
bin=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
check() {   # check "what" command...
  local what=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $what"; fi
}

args=(train --data "$src/tests/fixtures/text" --model tiny --steps 40 --batch 8 --seq 64
      --lr 3e-3 --warmup 5 --microbatches 2)
"$bin" "${args[@]}" > "$work/a.txt"
check "first run exits 0" [ $? -eq 0 ]
"$bin" "${args[@]}" > "$work/b.txt"
"$bin" "${args[@]}" --seed 7 > "$work/c.txt"
losses() { grep '^step' "$1" | sed 's/.*| loss \([0-9.]*\) |.*/\1/'; }
check "40 step lines" [ "$(losses "$work/a.txt" | wc -l)" -eq 40 ]
check "summary line" grep -q '^done: 40 steps' "$work/a.txt"
first=$(losses "$work/a.txt" | head -1)
last=$(losses "$work/a.txt" | tail -5 | sort -n | tail -1)
check "loss falls ($first -> worst of last five $last)" awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.0) }'
check "same seed, same losses" cmp -s <(losses "$work/a.txt") <(losses "$work/b.txt")
differ() { ! cmp -s "$1" "$2"; }
check "other seed, other losses" differ <(losses "$work/a.txt") <(losses "$work/c.txt")
check "step line has every field" grep -qE '^step +1/40 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| norm [0-9.]+ \| +[0-9]+ tok/s \| +[0-9.]+ GFLOP/s \| +[0-9.]+ ms$' "$work/a.txt"
"$bin" train --help > "$work/help.txt"
check "--help exits 0 and lists --microbatches" grep -q -- '--microbatches M' "$work/help.txt"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
