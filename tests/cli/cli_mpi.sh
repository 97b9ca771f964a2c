#!/usr/bin/env bash
# `pptrain train --transport mpi` under mpirun: P = 2 ranks print the same losses as the
# local transport (rank 0 prints, once), P = 2 x D = 2 replicas on 4 ranks match local
# --dp 2, and a world of the wrong size ends every rank with one line and a non-zero exit.
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
