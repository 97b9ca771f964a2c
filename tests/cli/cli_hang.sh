#!/usr/bin/env bash
# A hang names its culprit (issue 12 §4). Under `mpirun -np 4` (4 stages, 1f1b, M=2) each rank
# in turn is stalled by the test hook PPTRAIN_TEST_STALL=RANK:STEP:POINT, once in a receive and
# once in the norm all-reduce: rank 0's line names the stalled rank, its stage, action and
# microbatch (the others' lines say they wait on it; when rank 0 itself is stalled, theirs
# name it), and mpirun returns (every rank gone) within --timeout + 5 s of a healthy run's
# start-up. Also: rank 0 slow to record the failure (its store locked), the gradient
# all-reduce (--dp 2), SIGSTOP of rank 2, kill -9 of rank 1 (the survivors name it, the store
# records the run failed with that line), and local threads.
# (Ctrl-C under mpirun is not here: its checkpoint must beat mpirun's SIGKILL one second after
# SIGTERM, which a loaded CI machine does not promise.)
# usage: cli_hang.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"

export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"   # as cli_mpi.sh: Open MPI's own
mpi=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x OMP_NUM_THREADS=1
     -x OPENBLAS_NUM_THREADS=1)
timeout_s=2
args=(train --data "$src/tests/fixtures/text" --model tiny --batch 8 --seq 32 --microbatches 2 --stages 4
      --schedule 1f1b --timeout "$timeout_s" --db runs.db)
now() { date +%s.%N; }
within() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }   # within SECONDS LIMIT

# A healthy 1-step run: what start-up and teardown cost here (ASan makes them slower).
t0=$(now)
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --steps 1 --transport mpi > healthy.txt 2>&1
check "a healthy mpi run exits 0" [ $? -eq 0 ]
limit=$(awk -v a="$(now)" -v b="$t0" -v t="$timeout_s" 'BEGIN { print a - b + t + 5 }')

# stall NAME RANK POINT EXTRA...: mpirun with rank RANK stalled at POINT of step 1; checks it
# fails, and in time. The output is in NAME.txt.
stall() {
  local name=$1 rank=$2 point=$3
  shift 3
  local t1 elapsed
  t1=$(now)
  timeout 120 "${mpi[@]}" -x PPTRAIN_TEST_STALL="$rank:1:$point" -np 4 "$bin" "${args[@]}" --steps 2 \
    --transport mpi "$@" > "$name.txt" 2>&1
  check "$name: exits non-zero" [ $? -ne 0 ]
  elapsed=$(awk -v a="$(now)" -v b="$t1" 'BEGIN { print a - b }')
  check "$name: every rank gone in ${elapsed} s (limit ${limit} s)" within "$elapsed" "$limit"
}
# names NAME TEXT: a line of NAME.txt has TEXT.
names() { check "$1: says '$2'" grep -qF -- "$2" "$1.txt"; }

# In a receive: action 4 of rank 0 is RECV_B 0,mb 0; action 0 of the others RECV_F r,mb 0.
stall recv0 0 4
names recv0 "waits on rank 0 (stage 0), stopped at action 4 (RECV_B 0,mb 0) of step 1"
for r in 1 2 3; do
  stall "recv$r" "$r" 0
  names "recv$r" "pptrain: rank $r (stage $r) stopped making progress at action 0 (RECV_F $r,mb 0) of step 1"
  names "recv$r" "waits on rank $r (stage $r)"
done
# In the norm and loss all-reduce.
stall norm0 0 norm
names norm0 "waits on rank 0 (stage 0), stopped in the norm and loss all-reduce of step 1"
for r in 1 2 3; do
  stall "norm$r" "$r" norm
  names "norm$r" "pptrain: rank $r (stage $r) stopped making progress in the norm and loss all-reduce of step 1"
done
# Rank 0 slow to report: another process holds the store locked from before the stall until
# 3 s after another rank's line says it failed, so recording the run's end waits that long
# (past the 2 s the others give a rank 0 that has not heard of the failure). The others wait
# for rank 0 to exit (it has given up, so it is reporting) rather than exit first and have
# mpirun kill it mid-report: its line stays, and the store has the run failed with that line,
# not left 'running'.
rm -f runs.db
hold_s=3
t1=$(now)
timeout 120 "${mpi[@]}" -x PPTRAIN_TEST_STALL="2:1:norm" -np 4 "$bin" "${args[@]}" --steps 2 --transport mpi \
  > locked.txt 2>&1 &
mp=$!
for ((i = 0; i < 600; i++)); do grep -q 'recording run' locked.txt && break; sleep 0.02; done
{
  echo "begin exclusive;"
  for ((i = 0; i < 600; i++)); do grep -q 'waits on rank 2' locked.txt && break; sleep 0.02; done
  sleep "$hold_s"
  echo "commit;"
} | sqlite3 runs.db &
locker=$!
wait "$mp"
check "locked: exits non-zero" [ $? -ne 0 ]
wait "$locker"
elapsed=$(awk -v a="$(now)" -v b="$t1" 'BEGIN { print a - b }')
check "locked: every rank gone in ${elapsed} s (limit ${limit} + ${hold_s} s)" within "$elapsed" "$(awk -v a="$limit" \
  -v b="$hold_s" 'BEGIN { print a + b }')"
names locked "pptrain: rank 2 (stage 2) stopped making progress in the norm and loss all-reduce of step 1"
check "locked: the store has the run failed, naming rank 2" [ "$(sqlite3 runs.db \
  "select status from runs where error like 'rank 2 (stage 2) stopped making progress%'")" = failed ]
rm -f runs.db

# In the gradient all-reduce over replicas: 2 stages x 2 replicas, world rank 3 = stage 1 of replica 1.
stall grads3 3 grads --stages 2 --dp 2
names grads3 "pptrain: rank 3 (stage 1) stopped making progress in the gradient all-reduce over replicas of step 1"

# pid_of_rank MPIRUN_PID RANK: the process of that world rank under this mpirun.
pid_of_rank() {
  local p
  for p in $(pgrep -P "$1"); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && echo "$p"
  done
}
# signal_rank NAME SIGNAL RANK: a long run, SIGNAL to RANK once a step is done; NAME.txt.
signal_rank() {
  local name=$1 sig=$2 rank=$3 mp pid i t1 elapsed
  rm -f runs.db
  "${mpi[@]}" -np 4 "$bin" "${args[@]}" --steps 100000 --transport mpi > "$name.txt" 2>&1 &
  mp=$!
  for ((i = 0; i < 300; i++)); do grep -q '^step' "$name.txt" && break; sleep 0.1; done
  pid=$(pid_of_rank "$mp" "$rank")
  check "$name: rank $rank found under mpirun" [ -n "$pid" ]
  t1=$(now)
  [ -n "$pid" ] && kill "-$sig" "$pid"
  wait "$mp"
  check "$name: exits non-zero" [ $? -ne 0 ]
  elapsed=$(awk -v a="$(now)" -v b="$t1" 'BEGIN { print a - b }')
  check "$name: every rank gone ${elapsed} s after the signal" within "$elapsed" "$((timeout_s + 5))"
}
signal_rank sigstop2 STOP 2
names sigstop2 "pptrain: rank 2 (stage 2) stopped making progress"
signal_rank kill1 KILL 1
names kill1 "pptrain: rank 1 (stage 1) died"
check "kill1: a survivor says it waits on rank 1" grep -q "waits on rank 1 (stage 1), died" kill1.txt
check "kill1: the store has the run failed, naming rank 1" \
  [ "$(sqlite3 runs.db "select status from runs where error like 'rank 1 (stage 1) died%'")" = failed ]

# Local threads: the same hook, the one line of the process names the stalled rank.
for case in "2 3 at action 3 (RECV_F 2,mb 1)" "1 norm in the norm and loss all-reduce"; do
  read -r rank point what <<< "$case"
  t1=$(now)
  PPTRAIN_TEST_STALL="$rank:1:$point" timeout 60 "$bin" "${args[@]}" --steps 2 > "local$rank.txt" 2>&1
  check "local stall of rank $rank: exits 2" [ $? -eq 2 ]
  names "local$rank" "pptrain: rank $rank (stage $rank) stopped making progress $what of step 1"
  elapsed=$(awk -v a="$(now)" -v b="$t1" 'BEGIN { print a - b }')
  check "local stall of rank $rank: over in ${elapsed} s" within "$elapsed" "$((timeout_s + 5))"
done

if [ "$failed" -ne 0 ]; then
  for f in "$work"/*.txt; do echo "== $f"; grep -v '^step' "$f"; done
fi
cli_finish
