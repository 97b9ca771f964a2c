#!/usr/bin/env bash
# `pptrain watch` on a run a headless `pptrain train` is writing, driven in tmux: the live
# screen read-only (stage rows from the store, the planned timeline with the measured and
# ideal bubble, the loss) follows the run to its end; quit leaves the run alone. And the
# console's and watch's command-line errors: one line on stderr, exit code 2.
# usage: cli_console_watch.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"
source "$(dirname "$0")/lib_console.sh"

expect_error() {   # expect_error "what it should mention" args...
  local want=$1
  shift
  "$bin" "$@" >stdout.txt 2>stderr.txt </dev/null
  local code=$? lines
  lines=$(wc -l < stderr.txt)
  if [ "$code" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$want" stderr.txt && [ ! -s stdout.txt ]; then
    pass
  else
    fail "pptrain $* -> exit $code, $lines stderr lines (want 2, 1 line mentioning '$want')"
    cat stderr.txt
  fi
}

# ---- command-line errors and help -----------------------------------------------------------
expect_error "--steps" console --steps many
expect_error "--theme needs a value" console --theme
expect_error "unknown option '--frobnicate'" console --frobnicate
expect_error "no run store" watch --db "$work/none.db"
expect_error "unknown option" watch --bogus
expect_error "one RUN at most" watch 1 2
if "$bin" console --help | grep -q -- '--theme NAME|FILE' && "$bin" --help | grep -q '^  watch '; then pass
else fail "console --help and pptrain --help"; fi
if "$bin" --version > version.txt && grep -Eq '^pptrain [0-9]+\.[0-9]+\.[0-9]+$' version.txt &&
   grep -q 'GPU stages: ' version.txt && grep -q 'SQLite 3\.' version.txt; then pass
else fail "pptrain --version:"; cat version.txt; fi
if command -v setsid >/dev/null; then
  setsid -w "$bin" console --db "$work/x.db" </dev/null >stdout.txt 2>stderr.txt
  code=$?
  if [ $code -eq 2 ] && grep -q "needs a terminal" stderr.txt; then pass; else fail "no terminal: exit $code"; cat stderr.txt; fi
fi

if ! command -v tmux >/dev/null || [ ! -r /usr/share/games/fortunes ]; then
  echo "watch in tmux skipped: needs tmux and /usr/share/games/fortunes"
  cli_finish
  exit
fi

# ---- watch a headless run ------------------------------------------------------------------
"$bin" train --data /usr/share/games/fortunes --db "$work/runs.db" --steps 400 --seq 64 --batch 16 \
  --microbatches 8 --stages 4 --schedule zb-h1 --lr 3e-3 --warmup 20 >train.log 2>&1 &
train_pid=$!
for _ in $(seq 100); do [ -s "$work/runs.db" ] && break; sleep 0.1; done
expect_error "no run 99" watch --db "$work/runs.db" 99

tm new-session -d -x 120 -y 40 "cd '$work' && '$bin' watch --db '$work/runs.db' 2>'$work/stderr.txt'; echo \$? > '$work/exit.txt'"
wait_for 20 '^pptrain watch (running|finished) +run 1 +zb-h1' "watch shows the run"
wait_for 20 '^[│x]3 +cpu +6-7 +.*[0-9]' "stage rows from the store"
wait_for 10 'timeline: zb-h1 planned, bubble 11\.1% at F=1 B=2' "the planned timeline"
wait_for 10 'stages +bubble [0-9.]+% = .* ideal .*\(run means\)' "the run's mean bubble and its parts"
wait_for 10 '^[│x]r0 +[F·.IW]*W' "a planned lane"
wait_for 10 'step [0-9]+/400' "the progress line"
wait_for 90 '^pptrain watch finished' "watch follows the run to its end"
wait_for 5 'step 400/400' "every step read"
tm send-keys q
for _ in $(seq 50); do [ -s "$work/exit.txt" ] && break; sleep 0.2; done
if [ "$(cat "$work/exit.txt" 2>/dev/null)" = 0 ]; then pass; else fail "watch exit code: '$(cat "$work/exit.txt" 2>/dev/null)'"; fi
wait "$train_pid"
code=$?
if [ $code -eq 0 ]; then pass; else fail "the watched run: exit $code"; cat train.log; fi
if grep -q '^  pipeline: zb-h1, 4 stages on 4 ranks x 1 replica, local transport, cpu fp32$' train.log; then pass
else fail "train's header says where the run runs:"; head -6 train.log; fi
if [ ! -s "$work/stderr.txt" ]; then pass; else fail "watch's stderr:"; cat "$work/stderr.txt"; fi
if ! ls "$work"/asan.* "$work"/ubsan.* >/dev/null 2>&1; then pass; else fail "sanitizer reports:"; cat "$work"/asan.* "$work"/ubsan.* 2>/dev/null | head -60; fi

cli_finish
