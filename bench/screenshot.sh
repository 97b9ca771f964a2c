#!/usr/bin/env bash
# bench/screenshot.sh: the console's screenshot in README.md and docs/console.md, taken from a
# real run. Starts the console's default run (`pptrain console --start`) in a private tmux
# server of a fixed size, waits until the run reaches STEP, captures the screen as text
# (`tmux capture-pane -p`) into docs/screenshot.txt, and rewrites the block between the
# `<!-- screenshot:begin -->` and `<!-- screenshot:end -->` lines of README.md and
# docs/console.md from it, with a caption naming the step, size, date and CPU. Then quits the
# console (the run is stopped; its store and checkpoints live in a temporary folder, removed).
# Prints the run's median step time so far when sqlite3 is installed.
# usage: bench/screenshot.sh [PPTRAIN] [STEP] [COLSxROWS]   (build/pptrain 200 100x34: room for the sample panel)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath "${1:-$src/build/pptrain}")
step=${2:-200}
size=${3:-100x34}
cols=${size%x*} rows=${size#*x}
[ -x "$bin" ] || { echo "screenshot.sh: $bin is not an executable (build first: ./setup.sh)" >&2; exit 2; }
case $step$cols$rows in *[!0-9]*) echo "screenshot.sh: STEP and COLSxROWS must be numbers" >&2; exit 2 ;; esac
command -v tmux > /dev/null || { echo "screenshot.sh: needs tmux" >&2; exit 2; }

work=$(mktemp -d)
sock=pptrain-screenshot-$$
tm() { tmux -L "$sock" "$@"; }
trap 'tm kill-server 2>/dev/null || true; rm -rf "$work"' EXIT
# Braille and box characters need a UTF-8 locale; the built-in dark theme, whatever the caller's.
if locale -a 2>/dev/null | grep -qix 'c.utf-\?8'; then export LC_ALL=C.UTF-8; fi
unset NO_COLOR
export PPTRAIN_THEMES=$src/themes

tm new-session -d -x "$cols" -y "$rows" "cd '$work' && exec '$bin' console --start"
# The run's first step can take a while on a loaded machine: allow 20 minutes in all.
deadline=$((SECONDS + 1200)) at=0
while [ "$at" -lt "$step" ]; do
  [ $SECONDS -le $deadline ] || { echo "screenshot.sh: the run did not reach step $step in time" >&2; exit 1; }
  sleep 0.5
  tm capture-pane -p > "$work/screen.txt" 2>/dev/null || { echo "screenshot.sh: the console exited" >&2; exit 1; }
  at=$(sed -nE 's/.*step ([0-9]+)\/[0-9]+.*/\1/p' "$work/screen.txt" | head -1)
  at=${at:-0}
done
# The screen of the step it reached, right-trimmed (tmux pads every line to the width).
sed -E 's/[[:space:]]+$//' "$work/screen.txt" > "$src/docs/screenshot.txt"
median=""
if command -v sqlite3 > /dev/null; then
  median=$(sqlite3 "$work/pptrain.db" "select step_ms from steps where run_id = 1 and step > 1 order by step_ms
    limit 1 offset (select count(*) / 2 from steps where run_id = 1 and step > 1)" 2>/dev/null || true)
fi
tm send-keys q; sleep 0.5; tm send-keys y   # quit asks while a run is live
for _ in $(seq 1 100); do tm has-session 2>/dev/null || break; sleep 0.2; done

load=$(cut -d' ' -f1 /proc/loadavg)   # the step time on screen depends on it
cpu=$(sed -nE 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
caption="The default run at step $at of 500, $cols x $rows, dark theme, captured by \`bench/screenshot.sh\` on $(date -u +%Y-%m-%d) ($cpu, $(nproc) cores, load average $load):"
for doc in README.md docs/console.md; do
  awk -v caption="$caption" -v shot="$src/docs/screenshot.txt" '
    /^<!-- screenshot:begin -->$/ { print; print ""; print caption; print ""; print "```text"
                                    while ((getline line < shot) > 0) print line; print "```"; print ""; skip = 1; next }
    /^<!-- screenshot:end -->$/   { skip = 0 }
    !skip' "$src/$doc" > "$work/doc"
  grep -q '^<!-- screenshot:end -->$' "$work/doc" || { echo "screenshot.sh: $doc has no screenshot markers" >&2; exit 1; }
  cat "$work/doc" > "$src/$doc"
done
echo "screenshot.sh: step $at at ${cols}x$rows written to docs/screenshot.txt, README.md and docs/console.md${median:+; median step $median ms}"
