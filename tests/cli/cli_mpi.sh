#!/usr/bin/env bash
# `pptrain train --transport mpi` under mpirun: P = 2 ranks print the same losses as the
# local transport (rank 0 prints, once), P = 2 x D = 2 replicas on 4 ranks match local
# --dp 2, and a world of the wrong size ends every rank with one line and a non-zero exit.
# mpirun -np 2 without --transport mpi (so every process a whole job) is refused in one line,
# by train and every other command that would run a job per process; -np 1 still trains.
# Skipped (exit 0, says so) while `pptrain train` has no --transport flag.
# usage: cli_mpi.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"

if ! "$bin" train --help 2>&1 | grep -q -- '--transport'; then
  echo "skipped: pptrain train has no --transport flag yet"
  exit 0
fi
# Under ASan the ranks skip leak checking: Open MPI abandons allocations in components it
# has unloaded by exit (unsymbolizable, so not suppressible by library).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
mpi=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x OMP_NUM_THREADS=1
     -x OPENBLAS_NUM_THREADS=1)
args=(train --data "$src/tests/fixtures/text" --model tiny --steps 6 --batch 8 --seq 32 --microbatches 2
      --stages 2 --schedule 1f1b --timeout 30)
losses() { grep '^step' "$1" | sed 's/.*| loss \([0-9.]*\) |.*/\1/'; }
close() {   # close FILE_A FILE_B: the same number of losses, each within 1e-4 relative
  paste <(losses "$1") <(losses "$2") | awk 'NF != 2 { bad = 1 }
    { d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $2) bad = 1 } END { exit bad || NR == 0 }'
}

"$bin" "${args[@]}" > "$work/local.txt" 2>&1
check "local P=2 exits 0" [ $? -eq 0 ]
"${mpi[@]}" -np 2 "$bin" "${args[@]}" --transport mpi > "$work/mpi.txt" 2>&1
check "mpi P=2 exits 0" [ $? -eq 0 ]
check "mpi P=2: 6 step lines, from rank 0 only" [ "$(losses "$work/mpi.txt" | wc -l)" -eq 6 ]
check "mpi P=2 losses equal the local ones" cmp -s <(losses "$work/local.txt") <(losses "$work/mpi.txt")

"$bin" "${args[@]}" --dp 2 > "$work/local_dp.txt" 2>&1
check "local P=2 D=2 exits 0" [ $? -eq 0 ]
"${mpi[@]}" -np 4 "$bin" "${args[@]}" --dp 2 --transport mpi > "$work/mpi_dp.txt" 2>&1
check "mpi P=2 D=2 exits 0" [ $? -eq 0 ]
check "mpi P=2 D=2 matches local D=2" close "$work/local_dp.txt" "$work/mpi_dp.txt"
check "D=2 matches D=1 (same global batch)" close "$work/local.txt" "$work/local_dp.txt"

"${mpi[@]}" -np 3 "$bin" "${args[@]}" --dp 2 --transport mpi > "$work/size.txt" 2>&1
check "wrong world size exits non-zero" [ $? -ne 0 ]
check "every rank says why, once" [ "$(grep -c 'pptrain: mpirun started 3 ranks but --stages 2 x --dp 2 needs 4' \
  "$work/size.txt")" -eq 3 ]

# mpirun with the local transport (the default): every process would run the whole job alone,
# each recording its own run. Refused on every rank before anything is recorded or written,
# exit 2, one line on stderr from rank 0 alone (each rank's stderr to its own file, so mpirun's
# own banner is not counted). With -np 1 the local transport trains as without mpirun.
on_ranks() {   # on_ranks NAME ARGS...: pptrain ARGS on 2 ranks, rank R's stderr in NAME.err.R
  local name=$1
  shift
  "${mpi[@]}" -np 2 sh -c 'out=$1; shift; exec "$@" 2>"$out.err.$OMPI_COMM_WORLD_RANK"' sh "$work/$name" \
    "$bin" "$@" > "$work/$name.txt" 2>&1
}
on_ranks local2 "${args[@]}" --db "$work/local2.db" --ckpt-dir "$work/local2-ck"
check "mpirun -np 2 with the local transport exits 2" [ $? -eq 2 ]
check "one line on stderr across both ranks" [ "$(cat "$work"/local2.err.* | wc -l)" -eq 1 ]
check "rank 0's, saying what to pass" grep -q "^pptrain: started by mpirun as 2 processes, but --transport is local \
(threads of one process): pass --transport mpi" "$work/local2.err.0"
check "no run recorded, no checkpoint written" [ ! -e "$work/local2.db" -a ! -e "$work/local2-ck" ]
"${mpi[@]}" -np 1 "$bin" "${args[@]}" --db "$work/local1.db" > "$work/local1.txt" 2>&1
check "mpirun -np 1 with the local transport trains" [ $? -eq 0 ]
check "and records one run" [ "$(sqlite3 "$work/local1.db" 'SELECT count(*) FROM runs')" = 1 ]
check "with the losses of the local run" cmp -s <(losses "$work/local.txt") <(losses "$work/local1.txt")
# A PMIx launcher alone (prterun, srun --mpi=pmix) names each process's rank (PMIX_RANK) but
# not the world's size: mpirun's processes with OMPI_COMM_WORLD_* taken out stand in for one.
# The size comes from MPI then, and the copies are refused all the same; -np 1 still trains.
pmix_ranks() {   # pmix_ranks NAME NP ARGS...: as on_ranks, with no OMPI_COMM_WORLD_* variables
  local name=$1 np=$2
  shift 2
  "${mpi[@]}" -np "$np" sh -c 'out=$1; r=$OMPI_COMM_WORLD_RANK; shift
    exec env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE "$@" 2>"$out.err.$r"' sh "$work/$name" \
    "$bin" "$@" > "$work/$name.txt" 2>&1
}
pmix_ranks pmix2 2 "${args[@]}" --db "$work/pmix2.db"
check "PMIx alone, -np 2, local transport: exit 2" [ $? -eq 2 ]
check "PMIx alone: rank 0's one line, with the size MPI gave" \
  bash -c "[ \"\$(cat '$work'/pmix2.err.* | wc -l)\" -eq 1 ] &&
           grep -q '^pptrain: started by mpirun as 2 processes, but --transport is local' '$work/pmix2.err.0'"
check "PMIx alone: no run recorded" [ ! -e "$work/pmix2.db" ]
pmix_ranks pmix1 1 "${args[@]}" --db "$work/pmix1.db"
check "PMIx alone, -np 1, local transport: trains" [ $? -eq 0 ]
check "PMIx alone, -np 1: the local run's losses" cmp -s <(losses "$work/local.txt") <(losses "$work/pmix1.txt")
# Every other command that would run its whole job in each process, the same way; the ones
# that only read (plan, history) run in each.
n=0
db="--db $work/cmd.db"
text=$src/tests/fixtures/text
for cmd in "console --steps 2 $db" "train --tui --data $text --steps 2 $db" "check --data $text --stages 2 $db" \
           "sample $src/tests/fixtures/hf_generate --prompt Hi $db" "tokenize --tokenizer t.json --out o text" \
           "export latest out $db"; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  on_ranks "cmd$n" $cmd
  code=$?
  check "$cmd under mpirun -np 2: exit 2 ($code), one line from rank 0" \
    bash -c "[ $code -eq 2 ] && [ \"\$(cat '$work'/cmd$n.err.* | wc -l)\" -eq 1 ] &&
             grep -q '^pptrain: started by mpirun as 2 processes' '$work/cmd$n.err.0'"
done
check "and nothing recorded or written" [ ! -e "$work/cmd.db" -a ! -e "$work/o" -a ! -e "$work/out" ]
"${mpi[@]}" -np 2 "$bin" plan --stages 2 --microbatches 4 > "$work/plan.txt" 2>&1
check "plan runs in each process" [ $? -eq 0 ]
"${mpi[@]}" -np 2 "$bin" history list --db "$work/local1.db" > "$work/history.txt" 2>&1
check "history reads in each process" [ $? -eq 0 ]

# Tied embeddings across processes: the first and last stage's ranks all-reduce E + H, so
# P=2 x D=2 over mpirun prints the bits of one stage with D=2 (the local transport).
tied=(train --init-from "$src/tests/fixtures/hf_variants/tied" --data "$src/tests/fixtures/text" --db ''
      --steps 4 --batch 8 --seq 32 --microbatches 2 --timeout 30)
steps_of() { grep '^step' "$1" | sed 's/| *[0-9]* tok.*//'; }
"$bin" "${tied[@]}" --stages 1 --dp 2 > "$work/tied-local.txt" 2>&1
"${mpi[@]}" -np 4 "$bin" "${tied[@]}" --stages 2 --dp 2 --transport mpi > "$work/tied-mpi.txt" 2>&1
check "tied embeddings over mpirun P=2 D=2: the bits of one stage" \
  cmp -s <(steps_of "$work/tied-local.txt") <(steps_of "$work/tied-mpi.txt")
check "tied embeddings: 4 steps printed" [ "$(steps_of "$work/tied-mpi.txt" | wc -l)" -eq 4 ]

if [ "$failed" -ne 0 ]; then
  for f in "$work"/*.txt; do echo "== $f"; cat "$f"; done
fi
cli_finish
