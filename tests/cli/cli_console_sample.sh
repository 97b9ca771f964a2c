#!/usr/bin/env bash
# tests/cli/cli_console_sample.sh: the console's sample panel (issue 28), driven in tmux as
# cli_console_tmux.sh drives the console: during a short run the model's latest sample shows
# with the step it came from and sampling's share of the run's time; w hides and shows it
# (F1's help lists w); it folds away on a terminal below its height (80x23) and comes back;
# after the run the History screen shows the run's samples. The captures are kept in
# $PPTRAIN_CAPTURE_DIR when that is set.
# usage: cli_console_sample.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"
if ! command -v tmux >/dev/null; then
  echo "skipped: no tmux (setup.sh installs it)"
  exit 0
fi
source "$(dirname "$0")/lib_console.sh"

panel='^┌─ sample at step [0-9]+ +\(sampling: [0-9.]+% of the run.s time\)'
run=(--db "$work/runs.db" --data "$src/tests/fixtures/text" --steps 400 --seq 32 --batch 8 --microbatches 4 --stages 2
     --sample-every 5 --sample-tokens 16)
tm new-session -d -x 120 -y 40 "cd '$work' && '$bin' console ${run[*]} 2>'$work/stderr.txt'; echo \$? > '$work/exit.txt'"
if ! wait_for 10 'run setup' "the console opens on setup"; then
  cat "$work/stderr.txt"
  cli_finish
  exit
fi
tm send-keys Enter

# The panel: the latest sample while the run goes on, its step and its share of the time.
wait_for 60 "$panel" "the sample panel shows a sample with its step"
check "the sample arrives while the run is live" grep -Eq '^pptrain running' "$work/screen.txt"
check "the panel sits right above the key bar" bash -c \
  "grep -v '^ *\$' '$work/screen.txt' | tail -5 | head -1 | grep -Eq '$panel'"
keep sample_panel

# w hides it and shows it again; F1 lists the key.
tm send-keys w
wait_gone 5 '^┌─ sample at step' "w hides the sample panel"
tm send-keys w
wait_for 5 "$panel" "w shows it again"
tm send-keys F1
wait_for 5 'w +sample panel on / off' "the help lists w"
tm send-keys Escape

# Below its height it folds away, and comes back.
tm resize-window -x 80 -y 23
wait_gone 5 '^┌─ sample at step' "80x23: the sample panel folds away"
wait_for 5 '^[│x]1 +cpu ' "80x23: the stage rows stay"
tm resize-window -x 120 -y 40
wait_for 5 "$panel" "120x40: the sample panel is back"

# Stop the run; the History screen shows its samples.
tm send-keys F7
wait_for 60 '^pptrain stopped' "the run stops"
tm send-keys F4
wait_for 10 'samples \([0-9]+ in the run\), the latest:' "History shows the run's samples"
wait_for 5 '[│x]step [0-9]+ +[^ ]' "History shows a sample's step and text"
keep history_samples
tm send-keys q
for _ in $(seq 50); do [ -s "$work/exit.txt" ] && break; sleep 0.2; done
check "the console quits with 0" [ "$(cat "$work/exit.txt" 2>/dev/null)" = "0" ]
# A sanitizer build writes its reports to files while the console draws (lib_console.sh).
if ! ls "$work"/asan.* "$work"/ubsan.* >/dev/null 2>&1; then pass; else fail "sanitizer reports:"; cat "$work"/asan.* "$work"/ubsan.* 2>/dev/null | head -60; fi
cli_finish
