#!/usr/bin/env bash
# The console under MPI, driven in tmux: `mpirun -np 2 pptrain console --transport mpi`.
# Rank 0 draws on /dev/tty, rank 1 waits for its commands: a first run (1f1b) shows both
# stage rows; a second run (gpipe, chosen on the setup screen) starts on both ranks without
# relaunching anything; history lists both; quit ends both processes with exit code 0.
# Then the same as a person types it at an interactive bash prompt (job control on, mpirun
# forwarding the terminal to rank 0's stdin): Enter at once starts the run, '+' zooms, a
# resize redraws, q quits, Ctrl-C twice stops `train --tui`; mpirun is never stopped by the
# terminal (state T), and the prompt comes back with exit status 0 each time.
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

# ---- typed at an interactive shell ------------------------------------------------------------
# mpirun_stopped: whether any mpirun of this test is stopped by job control (ps state T).
mpirun_stopped() { ps -eo stat=,args= | grep -v grep | grep "$work/shell-runs.db" | grep -q '^T'; }
# typed COMMAND: types COMMAND at the shell's prompt and presses Enter.
typed() { tm send-keys -t shell "$1" Enter; }
shell_rc() {   # shell_rc WHAT: the prompt came back, with status 0, and nothing was stopped
  for _ in $(seq 150); do
    tm capture-pane -p -t shell > "$work/shell.txt"; grep -q '^\$ $' "$work/shell.txt" && break; sleep 0.2
  done
  tm send-keys -t shell 'echo "rc=$?"' Enter
  sleep 0.5
  tm capture-pane -p -t shell > "$work/shell.txt"
  if grep -q '^rc=0' "$work/shell.txt" && ! grep -qi 'stopped' "$work/shell.txt"; then pass
  else fail "$1: the prompt did not come back with status 0:"; cat "$work/shell.txt"; fi
}
tm new-session -d -s shell -x 120 -y 40 "cd '$work' && PS1='\$ ' bash --norc --noprofile -i"
sleep 0.5
sargs="--db $work/shell-runs.db --ckpt-dir $work/shell-ck --seq 64 --batch 8 --microbatches 4 --timeout 60"
typed "clear; $mpi '$bin' console --transport mpi --steps 20 $sargs 2>'$work/shell-stderr.txt'"
wait_for 30 '\(\*\) 1f1b' "typed at a prompt: rank 0 opens the setup screen"
tm send-keys -t shell Enter
wait_for 60 '^pptrain (running|finished) +run 1 ' "typed at a prompt: Enter starts the run"
tm send-keys -t shell +
tm resize-window -t shell -x 100 -y 30
wait_for 60 '^pptrain finished +run 1 ' "typed at a prompt: the run finishes"
wait_for 5 '^[┌l][─q] stages.{90}[┐k]$' "typed at a prompt: redrawn at 100 columns after the resize"
check "typed at a prompt: mpirun never stopped by the terminal" eval '! mpirun_stopped'
tm send-keys -t shell q
shell_rc "console, q"

typed "clear; $mpi '$bin' train --tui --data '$src/tests/fixtures/text' --transport mpi --steps 100000 $sargs 2>'$work/shell-stderr.txt'"
wait_for 60 '^pptrain running +run 2 ' "typed at a prompt: train --tui runs"
tm send-keys -t shell +
sleep 1
check "typed at a prompt: '+' leaves mpirun running" eval '! mpirun_stopped'
tm send-keys -t shell C-c
wait_for 10 'Stop it' "typed at a prompt: Ctrl-C asks"
tm send-keys -t shell C-c
shell_rc "train --tui, Ctrl-C twice"
cli_finish
