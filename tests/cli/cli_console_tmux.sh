#!/usr/bin/env bash
# The console end to end, driven in tmux (send-keys in, capture-pane out): it opens on the
# setup screen with a CSV schedule of the working directory listed, starts a run (Enter),
# shows the stage rows, the timeline with measured and ideal bubble and the loss; switches
# to zb-h1 and starts a second run; the history screen lists both and compares them; the
# key bar answers a mouse click; help, a bad theme file, a terminal too small and back, and a
# quit that asks first while a run is live (it stops with a checkpoint). Both runs land in
# the run store. Last, a run on OpenBLAS's AVX2 kernels: the header says when that leaves an
# AVX-512 CPU's AVX-512 unused; and console --resume, whose form opens on the run it continues.
# The captures are kept in $PPTRAIN_CAPTURE_DIR when that is set.
# usage: cli_console_tmux.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"
if ! command -v tmux >/dev/null; then
  echo "skipped: no tmux (setup.sh installs it)"
  exit 0
fi
if [ ! -r /usr/share/games/fortunes ]; then
  echo "skipped: no /usr/share/games/fortunes (apt-get install fortunes)"
  exit 0
fi
source "$(dirname "$0")/lib_console.sh"

# The bubble's parts on the last captured screen add up to the measured figure as printed.
bubble_adds_up() {
  local line
  line=$(grep -oE 'bubble [0-9.]+% = [-0-9.]+ ideal \+ [-0-9.]+ [a-z]+ \+ [-0-9.]+ [a-z]+ \+ [-0-9.]+ [a-z]+' \
         "$work/screen.txt" | head -1)
  if awk -v l="$line" 'BEGIN { n = split(l, w, " "); m = w[2]; sub("%", "", m)
                              d = w[4] + w[7] + w[10] + w[13] - m; exit !(n == 14 && d < 0.05 && d > -0.05) }'; then
    pass
  else
    fail "the bubble's parts do not add up: '$line'"
  fi
}

# Nothing cut at COLSxROWS: every rank's row and lane, the key bar's labels whole.
all_there() {   # all_there COLS ROWS
  tm resize-window -x "$1" -y "$2"
  wait_for 5 "^┌─ stages.{$(($1 - 10))}┐\$" "$1x$2: redrawn at its width"
  wait_for 5 '^[│x]3 +(cpu +)?6-7 ' "$1x$2: rank 3's row"
  wait_for 5 '^[│x]r3 ' "$1x$2: rank 3's lane"
  local bar
  bar=$(grep -v '^ *$' "$work/screen.txt" | tail -1)
  if [[ "$bar" =~ ^(F[0-9]+(Help|Setup|Live|History|Start|Pause|EMA|Stop|Theme|Quit)\ ?)+\ *$ ]]; then pass
  else fail "$1x$2: the key bar has a cut label: '$bar'"; fi
}

# A theme file with a bad line, and a schedule as a CSV file in the working directory, saved
# with a UTF-8 byte order mark as a spreadsheet's "CSV UTF-8" writes it.
printf 'title = cyan bold\nborder = purpel\n' > bad.theme
{ printf '\357\273\277'; "$bin" plan --stages 4 --microbatches 8 --schedule 1f1b --dump-csv; } > mine.csv
printf 'step,loss\n1,5.5\n' > data.csv   # a CSV that is not a schedule: not listed

run=(--db "$work/runs.db" --steps 30 --seq 64 --batch 16 --microbatches 8 --stages 4 --theme "$work/bad.theme")
tm new-session -d -x 120 -y 40 "cd '$work' && '$bin' console ${run[*]} 2>'$work/stderr.txt'; echo \$? > '$work/exit.txt'"

# Setup screen: the default schedule, the CSV listed, the plan, the theme's error by file and line.
wait_for 10 'bad\.theme:2: .*purpel' "a bad theme line is named"
wait_for 5 '\(\*\) 1f1b' "setup shows the chosen schedule"
wait_for 5 '\( \) mine\.csv +csv' "setup lists the CSV schedule"
check "setup leaves a CSV that is not a schedule out" bash -c "! tmux -L '$sock' capture-pane -p | grep -q data.csv"
wait_for 5 'bubble 27\.27% predicted' "setup shows the plan's bubble"

# First run: stage rows, timeline lanes with letters, bubbles, loss.
tm send-keys Enter
wait_for 60 '^[│x]0 +cpu +0-1 ' "the first stage row"
wait_for 10 '^[│x]3 +cpu +6-7 ' "the last stage row"
wait_for 10 '^[│x]r0 +[-F·.B]*[FB]' "a timeline lane"
wait_for 10 'bubble [0-9.]+% = [-0-9.]+ ideal \+ [-0-9.]+ imbalance \+ [-0-9.]+ transfer \+ [-0-9.]+ (oversubscription|contention)' \
  "the bubble and its parts"
bubble_adds_up
wait_for 5 'busy ms +xfer +wait' "busy, transfer and wait per rank"
wait_for 5 'peak act +cpu% +rss' "CPU and resident memory per rank, as htop"
wait_for 5 '^[│x]3 +cpu +6-7 .* [0-9]+(\.[0-9])? +[0-9.]+[KMG] *[│x]$' "rank 3's CPU % and resident memory"
wait_for 5 'local cpu fp32' "the header says where the run runs"
if [ "$(nproc)" -lt 4 ]; then wait_for 5 "4 ranks on $(nproc) cores" "the header flags CPU oversubscription"; fi
wait_for 10 'loss \+ EMA' "the loss panel"
wait_for 60 '^pptrain finished +run 1 +1f1b' "the first run finishes"
keep live

# The timeline: zoom in, scroll, look back at an earlier step, and back to the latest.
tm send-keys +
wait_for 5 'timeline step 30 +x2' "+ zooms in"
tm send-keys ] Left
wait_for 5 'timeline step 29 of 30 +x2' "left shows the step before"
tm send-keys End - 
wait_for 5 'timeline step 30 ─' "End and - come back to the whole latest step"

# Nothing cut, nobody hidden at 80x24 and 60x20.
all_there 80 24
all_there 60 20
keep small
if [ "$(nproc)" -lt 4 ]; then   # a note leaves the oversubscription flag its room in the header
  tm send-keys -
  wait_for 5 'the whole step is shown' "60x20: a note"
  check "60x20: the header keeps '4 ranks on $(nproc) cores' beside the note" \
    bash -c "head -1 '$work/screen.txt' | grep -q '4 ranks on $(nproc) cores'"
fi
tm resize-window -x 120 -y 40

# Help opens and closes.
tm send-keys F1
wait_for 5 'pptrain console: keys' "F1 opens help"
wait_for 5 '[│x] bubble [0-9.]+% = [-0-9.]+ ideal \+ ' "the live screen's help gives the bubble and all its parts"
tm send-keys Escape
sleep 0.3

# Second run: zb-h1, three lines below 1f1b on the setup screen.
tm send-keys F2
wait_for 5 'run setup' "F2 opens setup"
wait_for 5 "by run 1's stage times, next: [a-z0-9-]+ P4 V[0-9] M[0-9]+" "setup suggests a layout from run 1"
tm send-keys Down Down Down Enter
wait_for 60 '^pptrain (running|finished) +run 2 +zb-h1' "the second run starts on zb-h1"
wait_for 10 '^[│x]r0 +[-F·.BIW]*[IW]' "the zb-h1 timeline shows split backwards"
wait_for 60 '^pptrain finished +run 2' "the second run finishes"

# History lists both runs, newest first; marking both compares them.
tm send-keys F4
wait_for 10 '^[│x] +2 +finished +zb-h1 ' "history lists run 2"
wait_for 5 '^[│x] +1 +finished +1f1b ' "history lists run 1"
tm send-keys ' ' j ' '
wait_for 5 'compare' "two marked runs are compared"
wait_for 5 '^.*[│x][*] 2 +zb-h1 ' "run 2 in the comparison"
keep history
# At 80x24 the run's pane has one line for its checkpoints: the picked one with its keys, never
# a heading without rows (issue 29). Both runs unmarked, run 1 picked again.
tm send-keys ' ' k ' ' j
wait_for 5 '─ run 1 ─' "unmarked: run 1's pane"
tm resize-window -x 80 -y 24
wait_for 5 '[│x]checkpoint [0-9]+/[0-9]+: step [0-9]+ complete \(c picks, F5 resumes\)' "80x24: the checkpoint line shows a checkpoint"
check "80x24: no checkpoint heading without rows" bash -c "! tmux -L '$sock' capture-pane -p | grep -q 'resumes):'"
tm resize-window -x 120 -y 40

# Resuming run 1, finished with its checkpoint at its last step, asks for the step to go on to.
tm send-keys F5
wait_for 5 'Go on to step: 60_ +\(its checkpoint is at its last step, 30' "resume offers the steps to go on to"
tm send-keys BSpace BSpace 4 0 Enter
wait_for 60 '^pptrain (running|finished) +run 3 +1f1b' "the finished run goes on as run 3"
wait_for 60 '^pptrain finished +run 3' "run 3 reaches step 40"
wait_for 5 'step 40/40' "run 3 ran to step 40"
tm send-keys F4

# A mouse click on the key bar's F2 (an xterm X10 report: press, release at column 9, last row).
tm send-keys -l $'\e[M )H\e[M#)H'
wait_for 5 'run setup' "a click on the key bar opens setup"

# Too small, then back.
tm resize-window -x 50 -y 12
wait_for 5 'terminal too small \(need 60x16\)' "the too-small notice"
tm resize-window -x 120 -y 40
wait_for 5 'run setup' "the screen comes back after the resize"

# A long run (steps typed into the form: twelve lines below zb-h1, past interleaved-zb, zb-v,
# dualpipe-v, mine.csv and eight fields): paused, then stopped with a checkpoint, then q quits.
tm send-keys Down Down Down Down Down Down Down Down Down Down Down Down 5 0 0 0 Enter
wait_for 5 'steps +5000 ' "typing a value into the form"
tm send-keys F5
wait_for 30 '^pptrain running +run 4 +zb-h1' "a fourth run starts"
# A status that announces a state goes when the state comes (issue 29): "pausing after this
# step" never stands beside "paused", nor "stopping after this step" beside "stopped".
tm send-keys p
wait_for 10 '^pptrain paused +run 4 ' "p pauses the run"
check "paused: no 'pausing after this step' beside it" bash -c "! tmux -L '$sock' capture-pane -p | grep -q 'pausing after this step'"
tm send-keys s
wait_for 30 '^pptrain stopped +run 4 ' "s stops the paused run"
check "stopped: no 'stopping after this step' beside it" bash -c "! tmux -L '$sock' capture-pane -p | grep -q 'stopping after this step'"
tm send-keys q
for _ in $(seq 150); do [ -s "$work/exit.txt" ] && break; sleep 0.2; done
if [ "$(cat "$work/exit.txt" 2>/dev/null)" = 0 ]; then pass; else fail "console exit code: '$(cat "$work/exit.txt" 2>/dev/null)'"; fi
if [ ! -s "$work/stderr.txt" ]; then pass; else fail "stderr not empty:"; cat "$work/stderr.txt"; fi
if ! ls "$work"/asan.* "$work"/ubsan.* >/dev/null 2>&1; then pass; else fail "sanitizer reports:"; cat "$work"/asan.* "$work"/ubsan.* 2>/dev/null | head -60; fi

# The runs landed in the store like headless ones.
got=$(sqlite3 "$work/runs.db" "SELECT group_concat(id || ':' || schedule || ':' || status || ':' || (SELECT count(*) FROM steps WHERE run_id = runs.id), ' ') FROM runs" 2>&1)
if [[ "$got" =~ ^1:1f1b:finished:30\ 2:zb-h1:finished:30\ 3:1f1b:finished:10\ 4:zb-h1:stopped:[0-9]+$ ]]; then pass
else fail "runs in the store: $got"; fi
resumed=$(sqlite3 "$work/runs.db" "SELECT resumed_from || ':' || steps_planned FROM runs WHERE id = 3" 2>&1)
if [ "$resumed" = "1:40" ]; then pass; else fail "run 3 resumed run 1 to step 40: '$resumed'"; fi
ck=$(sqlite3 "$work/runs.db" "SELECT count(*) FROM checkpoints WHERE run_id = 4 AND status = 'complete'" 2>&1)
if [ "$ck" = 1 ]; then pass; else fail "the stopped run's checkpoint: '$ck'"; fi

# The products held to oneDNN's SSE4.1 kernels: on a CPU that runs AVX the header says so (the
# cap is honoured) at 120 columns, and on any other CPU it says nothing.
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
avx=0
[[ "$flags" == *" avx "* ]] && avx=1
tm new-session -d -x 120 -y 40 "cd '$work' && ONEDNN_MAX_CPU_ISA=SSE41 '$bin' console --start --db '$work/blas.db' \
  --steps 5000 --seq 64 --batch 16 --microbatches 8 --stages 4 2>/dev/null; echo \$? > '$work/blas_exit.txt'"
wait_for 30 '^pptrain running +run 1 ' "a run on the SSE4.1 kernels starts"
if [ $avx = 1 ]; then
  # once the start's own note (6 s) has gone
  wait_for 15 '^pptrain running .*local cpu fp32 .*kernels SSE4.1 \(CPU: AVX' "an AVX CPU on SSE4.1 kernels: the header says so"
else
  sleep 8
  tm capture-pane -p > "$work/screen.txt"
  if head -1 "$work/screen.txt" | grep -q 'kernels SSE4.1'; then fail "no AVX here, yet: $(head -1 "$work/screen.txt")"; else pass; fi
fi
tm send-keys q
wait_for 5 'A run is live' "quit asks while a run is live"
tm send-keys y
for _ in $(seq 150); do [ -s "$work/blas_exit.txt" ] && break; sleep 0.2; done
if [ "$(cat "$work/blas_exit.txt" 2>/dev/null)" = 0 ]; then pass; else fail "console exit code: '$(cat "$work/blas_exit.txt" 2>/dev/null)'"; fi

# train --tui is train's run (issue 29): its defaults (20 steps, 1 stage), its rules (--data
# required), not the console's (500 steps, 4 stages, its fortune data).
"$bin" train --tui --db '' < /dev/null > /dev/null 2> "$work/tui-err.txt"
check "train --tui without --data: train's rule, one line" grep -q -- '--data PATH is required' "$work/tui-err.txt"
tm kill-server 2>/dev/null
tm new-session -d -x 120 -y 40 "cd '$work' && '$bin' train --tui --data '$src/tests/fixtures/text' --db '$work/tui.db' \
  2>/dev/null; echo \$? > '$work/tui_exit.txt'"
wait_for 60 '^pptrain finished +run 1 ' "train --tui's run finishes"
wait_for 5 '^step 20/20 ' "train --tui runs train's 20 steps"
wait_for 5 ' P1 V1 D1 M1 .* B8 T64 ' "train --tui runs train's one stage, batch 8 x 64"
tm send-keys q
for _ in $(seq 50); do [ -s "$work/tui_exit.txt" ] && break; sleep 0.2; done
check "train --tui exits 0" [ "$(cat "$work/tui_exit.txt" 2>/dev/null)" = 0 ]

# console --resume RUN: the form opens on the run it continues (its batch, seq, lr, warmup and
# data, not the console's defaults) and Enter runs it on its own data to the loss `train
# --resume` reaches; a changed batch is refused on the form in one line, a changed layout is
# taken. A finished run without --steps is one line, exit 2, before the screen opens.
tm kill-server 2>/dev/null
mkdir -p "$work/resume" && cd "$work/resume" || exit 1   # no CSV here: the form lists the 8 built-in schedules
"$bin" train --data "$src/tests/fixtures/text" --stages 2 --microbatches 2 --batch 8 --seq 32 --steps 6 --lr 2e-3 \
  --warmup 2 --ckpt-dir "$work/resume/ck" --db "$work/resume/r.db" > /dev/null 2>&1
check "a run to resume" [ $? -eq 0 ]
"$bin" console --resume 1 --db "$work/resume/r.db" > /dev/null 2> "$work/resume/end.txt"
check "console --resume of a finished run without --steps: exit 2" [ $? -eq 2 ]
check "... in one line" [ "$(cat "$work/resume/end.txt")" = \
  "pptrain: the checkpoint is at step 6, the end of its 6-step run (give --steps N to go on)" ]
"$bin" train --resume 1 --steps 5 --db "$work/resume/r.db" > /dev/null 2> "$work/resume/short.txt"
check "--steps short of the checkpoint says so" [ "$(cat "$work/resume/short.txt")" = \
  "pptrain: --steps 5 does not go past the checkpoint's step 6 (give --steps N with N > 6)" ]
console_resume() {   # console_resume: the console on run 1's checkpoint, to step 8
  tm new-session -d -x 120 -y 40 "cd '$work/resume' && '$bin' console --resume 1 --steps 8 --db '$work/resume/r.db' \
    2>> '$work/resume/stderr.txt'; echo \$? > '$work/resume/exit.txt'"
  wait_for 10 '^[│x] *batch B +8 ' "console --resume: the form shows the checkpoint's batch"
}
console_resume
wait_for 5 '^[│x] *seq T +32 ' "... its seq"
wait_for 5 '^[│x] *lr +0\.002 ' "... its lr"
wait_for 5 '^[│x] *warmup +2 ' "... its warmup"
wait_for 5 '^[│x] *steps +8 ' "... the --steps given"
wait_for 5 '^[│x] *data +.*fixtures/text' "... its data, not the console's demo text"
for _ in $(seq 11); do tm send-keys Down; done   # from 1f1b, the second of 8 schedules, to batch
tm send-keys Right
wait_for 5 '--batch cannot be changed on --resume' "a changed batch is refused on the form"
tm send-keys Left
wait_gone 5 'cannot be changed on --resume' "batch back: the refusal goes"
tm send-keys Enter
wait_for 30 '^pptrain finished +run 2 .* P2 V1 D1 M2 .* B8 T32 ' "the resumed run finishes, as its checkpoint laid it out"
tm send-keys q
for _ in $(seq 50); do [ -s "$work/resume/exit.txt" ] && break; sleep 0.2; done
check "console --resume exits 0" [ "$(cat "$work/resume/exit.txt" 2>/dev/null)" = 0 ]
rm -f "$work/resume/exit.txt"
console_resume
for _ in $(seq 7); do tm send-keys Down; done   # to stages
tm send-keys Right
wait_for 5 '^[│x] *stages P +3 ' "stages changed on the form"
tm send-keys Enter
wait_for 30 '^pptrain finished +run 3 .* P3 V1 D1 M2 ' "a changed layout is taken"
tm send-keys q
for _ in $(seq 50); do [ -s "$work/resume/exit.txt" ] && break; sleep 0.2; done
"$bin" train --resume 1 --steps 8 --db "$work/resume/r.db" > /dev/null 2>&1
losses() { sqlite3 "$work/resume/r.db" "SELECT group_concat(step || ':' || loss, ' ') FROM
  (SELECT step, loss FROM steps WHERE run_id = $1 ORDER BY step)" 2>&1; }
console_run=$(losses 2) train_run=$(losses 4)
if [[ "$console_run" =~ ^7:.*\ 8: ]] && [ "$console_run" = "$train_run" ]; then pass
else fail "console --resume against train --resume: '$console_run' / '$train_run'"; fi
check "the resumed run read its own data" grep -q "fixtures/text" <(sqlite3 "$work/resume/r.db" "SELECT config_json FROM runs WHERE id = 2")
if [ ! -s "$work/resume/stderr.txt" ]; then pass; else fail "stderr not empty:"; cat "$work/resume/stderr.txt"; fi
cd "$work" || exit 1

# Messages that go with their cause: a "cannot start" leaves the header once the form changes,
# a run that fails at its start does not read "started", and a setup screen too short for
# every rank's lane says which it shows.
tm kill-server 2>/dev/null
mkdir -p "$work/notes/adir" && cd "$work/notes" || exit 1
tm new-session -d -x 120 -y 40 "cd '$work/notes' && '$bin' console --db '$work/notes/r.db' --data '$src/tests/fixtures/text' \
  2>/dev/null"
wait_for 10 '^[│x] *stages P +4 ' "the setup form"
for _ in $(seq 7); do tm send-keys Down; done   # from 1f1b to stages
tm send-keys 9 Enter
wait_for 5 '^[│x] *stages P +9 ' "stages typed"
tm send-keys Enter
wait_for 5 '^pptrain setup +cannot start: 9 stages' "Enter refused, saying why"
tm send-keys 4 Enter
wait_gone 1 'cannot start' "the form changed: the refusal leaves the header (at once, not when it times out)"
tm resize-window -x 60 -y 16
wait_for 5 '^[│x]ranks 0-1 of 4 shown' "60x16: the plan says which ranks it shows"
tm kill-server 2>/dev/null
tm new-session -d -x 120 -y 40 "cd '$work/notes' && '$bin' console --db '$work/notes/adir' --data '$src/tests/fixtures/text' \
  2>/dev/null"
wait_for 10 '^[│x] *stages P +4 ' "the setup form, over a --db that is a folder"
tm send-keys Enter
wait_for 10 '^pptrain failed ' "the run fails at its start"
check "a failed run does not read 'started'" bash -c "! head -1 '$work/screen.txt' | grep -q started"
wait_for 5 'a folder, not a file' "... saying why"
tm kill-server 2>/dev/null
"$bin" console --themes-dir "$work/notes/none" > /dev/null 2> "$work/notes/themes.txt"
check "--themes-dir that does not exist: exit 2 at start" [ $? -eq 2 ]
check "... in one line" [ "$(cat "$work/notes/themes.txt")" = "pptrain: --themes-dir $work/notes/none: no such folder" ]
: > "$work/notes/a-file"
"$bin" console --themes-dir "$work/notes/a-file" > /dev/null 2> "$work/notes/themes.txt"
check "--themes-dir naming a file: exit 2, 'not a folder' (whatever errno held)" \
  [ "$(cat "$work/notes/themes.txt")" = "pptrain: --themes-dir $work/notes/a-file: not a folder" ]
cd "$work" || exit 1

cli_finish
