#!/usr/bin/env bash
# The console under MPI, driven in tmux: `mpirun -np 2 pptrain console --transport mpi`.
# Rank 0 draws on /dev/tty, rank 1 waits for its commands: a first run (1f1b) shows both
# stage rows; a second run (gpipe, chosen on the setup screen) starts on both ranks without
# relaunching anything; history lists both; quit ends both processes with exit code 0.
# usage: cli_console_mpi.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"
if ! command -v tmux >/dev/null || ! command -v mpirun >/dev/null; then
  echo "skipped: needs tmux and mpirun"
  exit 0
fi
if [ ! -r /usr/share/games/fortunes ]; then
  echo "skipped: no /usr/share/games/fortunes (apt-get install fortunes)"
  exit 0
fi
source "$(dirname "$0")/lib_console.sh"

# As tests/cli/cli_mpi.sh: Open MPI abandons allocations in components it unloads at exit.
export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"

mpi="mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS -x UBSAN_OPTIONS -np 2"
args="console --transport mpi --db $work/runs.db --steps 20 --seq 64 --batch 8 --microbatches 4 --timeout 60"
tm new-session -d -x 120 -y 40 "cd '$work' && $mpi '$bin' $args 2>'$work/stderr.txt'; echo \$? > '$work/exit.txt'"

wait_for 30 '\(\*\) 1f1b' "rank 0 opens the setup screen"
wait_for 5 'stages P +2 ' "the world size sets P"
tm send-keys Enter
wait_for 60 '^[│x]1 +cpu +4-7 ' "rank 1's stage row"
wait_for 10 'mpi cpu fp32' "the header names the transport, device and precision"
wait_for 60 '^pptrain finished +run 1 ' "the first run finishes"

tm send-keys F2
wait_for 5 'run setup' "F2 opens setup"
tm send-keys Up Enter
wait_for 60 '^pptrain (running|finished) +run 2 +gpipe' "a second run (gpipe) starts on both ranks"
wait_for 60 '^pptrain finished +run 2' "the second run finishes"

tm send-keys F4
wait_for 10 '^[│x] +2 +finished +gpipe ' "history lists run 2"
wait_for 5 '^[│x] +1 +finished +1f1b ' "history lists run 1"
tm send-keys q
for _ in $(seq 150); do [ -s "$work/exit.txt" ] && break; sleep 0.2; done
if [ "$(cat "$work/exit.txt" 2>/dev/null)" = 0 ]; then pass; else fail "mpirun exit code: '$(cat "$work/exit.txt" 2>/dev/null)'"; cat "$work/stderr.txt"; fi
if ! ls "$work"/asan.* "$work"/ubsan.* >/dev/null 2>&1; then pass; else fail "sanitizer reports:"; cat "$work"/asan.* "$work"/ubsan.* 2>/dev/null | head -60; fi
got=$(sqlite3 "$work/runs.db" "SELECT group_concat(id || ':' || schedule || ':' || transport || ':' || status, ' ') FROM runs" 2>&1)
if [ "$got" = "1:1f1b:mpi:finished 2:gpipe:mpi:finished" ]; then pass; else fail "runs in the store: $got"; fi

cli_finish
