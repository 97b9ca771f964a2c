#!/usr/bin/env bash
# bench/bench_console_overhead.sh: the step time of `small` at P=2, M=8 (batch 16 x 256, one
# thread per rank, 5 steps), headless (`train`) and in the live console (`train --tui` in a
# tmux of 120 x 40), for two binaries alternated over ROUNDS rounds: the median step_ms of
# steps 2-5 from each run's store. Compares a build before and after a change (issue 26: the
# rooms moved, the step and the console overhead stayed within noise).
#   bench/bench_console_overhead.sh OLD_PPTRAIN NEW_PPTRAIN [ROUNDS]   (default 3)
# Needs tmux, sqlite3 and the fortunes package (setup.sh installs them). Not run by ctest.
set -u
# shellcheck disable=SC2034  # old and new are read as ${!which}
old=$(readlink -f "$1") new=$(readlink -f "$2") rounds=${3:-3}
work=$(mktemp -d)
trap 'tmux -L bench-console kill-server 2>/dev/null; rm -rf "$work"' EXIT
cd "$work" || exit 1
args=(--model small --stages 2 --microbatches 8 --batch 16 --seq 256 --steps 5 --warmup 1
      --data /usr/share/games/fortunes)
export OMP_NUM_THREADS=1
median_step() {   # median_step DB: the median step_ms of steps 2..5
  sqlite3 "$1" "SELECT step_ms FROM steps WHERE step > 1 ORDER BY step_ms" |
    awk '{a[NR] = $1} END {print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}'
}
for r in $(seq "$rounds"); do
  for which in old new; do
    bin=${!which}
    "$bin" train "${args[@]}" --db "h-$which-$r.db" > /dev/null 2>&1
    printf 'round %d %-3s headless %10.1f ms\n' "$r" "$which" "$(median_step "h-$which-$r.db")"
    tmux -L bench-console new-session -d -x 120 -y 40 "'$bin' train --tui ${args[*]} --db '$work/c-$which-$r.db' 2>/dev/null"
    for _ in $(seq 300); do
      n=$(sqlite3 "c-$which-$r.db" "SELECT count(*) FROM steps" 2>/dev/null)
      [ "${n:-0}" -ge 5 ] && break
      sleep 1
    done
    tmux -L bench-console send-keys q; sleep 1; tmux -L bench-console send-keys y
    tmux -L bench-console kill-server 2>/dev/null
    printf 'round %d %-3s console  %10.1f ms\n' "$r" "$which" "$(median_step "c-$which-$r.db")"
  done
done
