#!/usr/bin/env bash
# Predicted vs measured bubble of the same layout (docs/benchmarks.md, "plan --from-run"): every
# schedule of the registry (`pptrain plan --list`) is trained for a few steps, then
# `pptrain plan --from-run` predicts that run's own layout from its measured stage times.
# usage: bench/bench_plan_from_run.sh [PPTRAIN] [P] [MODEL] [T] [M] [STEPS]
#        (defaults: build/pptrain, 2, small, 128, 8, 6)
# Run it where P cores are free: ranks waiting for a core add a bubble the plan leaves out.
# "replay" is the run's own bubble less its contention part (`history show`: ideal +
# imbalance + transfer, a replay of every step at its measured per-action times), which
# machine load does not touch; "load" the 1-minute load average after the run.
set -euo pipefail
bin=${1:-build/pptrain}
P=${2:-2}
model=${3:-small}
T=${4:-128}
M=${5:-8}
steps=${6:-6}
data=${DATA:-/usr/share/games/fortunes}
db=$(mktemp -d)/runs.db
trap 'rm -rf "$(dirname "$db")"' EXIT
names=$("$bin" plan --list | sed -n 's/^| \([^ |]*\) | [0-9].*/\1/p')
printf "%-17s %2s %3s %9s %9s %9s %9s %6s %5s\n" schedule P M "step ms" measured replay predicted diff load
for sched in $names; do
  OMP_NUM_THREADS=1 "$bin" train --data "$data" --batching pack --model "$model" --seq "$T" --stages "$P" \
    --schedule "$sched" --microbatches "$M" --batch "$M" --steps "$steps" --db "$db" >/dev/null
  "$bin" history show latest --db "$db" --json >"$db.show"
  load=$(cut -d' ' -f1 /proc/loadavg)
  "$bin" plan --from-run latest --db "$db" --json --top 1 | python3 -c '
import json, sys
r = json.load(sys.stdin); m = r["measured"]; p = r["predicted"]
parts = json.load(open(sys.argv[1]))["run"]["mean_bubble_parts"]
replay = parts["ideal"] + parts["imbalance"] + parts["transfer"]
print("%-17s %2d %3d %9.1f %8.1f%% %8.1f%% %8.1f%% %+6.1f %5s" % (m["schedule"], m["stages"], m["microbatches"],
      m["step_ms"], 100 * m["bubble"], 100 * replay, 100 * p["bubble"], 100 * (p["bubble"] - m["bubble"]), sys.argv[2]))' \
    "$db.show" "$load"
done
