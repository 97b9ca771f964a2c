#!/usr/bin/env bash
# tests/audit/kill_resume.sh: the reliability audit's kill-and-resume trials, by hand (not run by
# ctest: a full round takes several minutes).
#   tests/audit/kill_resume.sh PPTRAIN [TRIALS_PER_LAYOUT]   (default 6)
#   CKPT_EVERY=N ...: checkpoint every N steps (default 3); 1 puts most kills inside a checkpoint
# For each layout (local P=2; local P=2 x D=2; mpirun -np 2; mpirun -np 4) and each trial: a
# reference run that is never killed, then a run SIGKILLed (the whole mpirun job) at a random
# step, resumed with --resume latest. A trial counts as bitwise when every loss the resumed run
# recorded equals the reference's at that step to the last bit, and as clean when no temporary
# file, no folder without a trainer_state.json, no 'writing' checkpoint row and no run row
# still 'running' (the killed run must be marked failed) is left after the resume. Prints one
# line per trial and the totals.
set -u
bin=$(readlink -f "$1")
per=${2:-6}
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe --mca btl self,vader -x OMP_NUM_THREADS)
base=(train --data "$src/tests/fixtures/text" --model tiny --steps 30 --batch 8 --seq 32 --microbatches 4
      --lr 3e-3 --warmup 3 --ckpt-every "${CKPT_EVERY:-3}")
losses() { sqlite3 "$1" "SELECT step, printf('%.17g', loss) FROM steps WHERE run_id = $2 ORDER BY step"; }

layout_cmd() {   # layout_cmd NAME: the launcher and layout flags of a layout
  case $1 in
    local-p2) echo "|--stages 2" ;;
    local-p2d2) echo "|--stages 2 --dp 2" ;;
    mpi-np2) echo "mpi 2|--stages 2 --transport mpi" ;;
    mpi-np4) echo "mpi 4|--stages 2 --dp 2 --transport mpi" ;;
  esac
}
launch() {   # launch NAME DB CKPT EXTRA...: runs the layout in the background; sets $pid
  local spec launcher flags name=$1 db=$2 ck=$3
  shift 3
  spec=$(layout_cmd "$name"); launcher=${spec%%|*}; flags=${spec#*|}
  # shellcheck disable=SC2086
  if [ -n "$launcher" ]; then setsid "${mpi[@]}" -np "${launcher#mpi }" "$bin" "${base[@]}" $flags --db "$db" --ckpt-dir "$ck" "$@" > "$db.out" 2>&1 < /dev/null &
  else setsid "$bin" "${base[@]}" $flags --db "$db" --ckpt-dir "$ck" "$@" > "$db.out" 2>&1 < /dev/null &
  fi
  pid=$!
}

trials=0 bitwise=0 clean=0
for name in local-p2 local-p2d2 mpi-np2 mpi-np4; do
  launch "$name" "ref-$name.db" "ref-$name"; wait "$pid"
  losses "ref-$name.db" 1 > "ref-$name.losses"
  for t in $(seq "$per"); do
    k=$((4 + RANDOM % 22)) db="t-$name-$t.db" ck="ck-$name-$t"
    launch "$name" "$db" "$ck"
    for _ in $(seq 3000); do grep -q "^step *$k/" "$db.out" 2>/dev/null && break; sleep 0.01; done
    kill -9 -- "-$pid" 2>/dev/null; pkill -9 -f -- "--db $db " 2>/dev/null; wait "$pid" 2>/dev/null
    spec=$(layout_cmd "$name"); launcher=${spec%%|*}
    if [ -n "$launcher" ]; then
      "${mpi[@]}" -np "${launcher#mpi }" "$bin" train --resume latest --db "$db" --transport mpi > "$db.resume" 2>&1 < /dev/null
    else "$bin" train --resume latest --db "$db" > "$db.resume" 2>&1; fi
    rc=$?
    losses "$db" 2 > "$db.losses"
    same=no; [ $rc -eq 0 ] && [ -s "$db.losses" ] && [ -z "$(comm -13 <(sort "ref-$name.losses") <(sort "$db.losses"))" ] &&
      [ "$(tail -1 "$db.losses" | cut -d'|' -f1)" = 30 ] && same=yes
    debris=$(find "$ck" -name '*.tmp' | wc -l)
    for d in $(find "$ck" -mindepth 2 -maxdepth 2 -type d -name 'step-*'); do [ -f "$d/trainer_state.json" ] || debris=$((debris + 1)); done
    rows=$(sqlite3 "$db" "SELECT (SELECT count(*) FROM checkpoints WHERE status = 'writing') +
                                 (SELECT count(*) FROM runs WHERE status = 'running')")
    tidy=no; [ "$debris" -eq 0 ] && [ "$rows" -eq 0 ] && tidy=yes
    trials=$((trials + 1)); [ $same = yes ] && bitwise=$((bitwise + 1)); [ $tidy = yes ] && clean=$((clean + 1))
    echo "$name trial $t: killed at step >= $k, resume exit $rc, bitwise $same, debris $debris files/folders + $rows rows"
  done
done
echo "kill-and-resume: $trials trials, $bitwise bitwise, $clean without debris"
