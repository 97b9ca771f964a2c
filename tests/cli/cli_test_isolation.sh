#!/usr/bin/env bash
# Tests that ctest runs side by side share no temporary path (the suite flaked when two
# mpiruns raced on Open MPI's session directory under one /tmp):
#   - every registered test's command starts with tests/private_tmp.sh;
#   - private_tmp.sh gives each command its own TMPDIR, and removes it afterwards whatever
#     the command's status, passing that status on;
#   - four mpirun jobs started at once, each through private_tmp.sh, all succeed, twice.
source "$(dirname "$0")/lib_cli.sh" "$@"
build=$(cd "$(dirname "$bin")" && pwd)
launcher=$src/tests/private_tmp.sh

# Every test goes through the launcher: the CTestTestfile.cmake files cmake wrote hold one
# add_test line per test (read, not `ctest -N`, which would rewrite the log of a ctest run
# that is going on in the same build).
find "$build" -name CTestTestfile.cmake -exec grep -h '^add_test(' {} + > tests.txt
total=$(grep -c . tests.txt)
isolated=$(grep -c '"sh" "[^"]*/tests/private_tmp.sh"' tests.txt)
check "cmake registered the tests ($total)" [ "$total" -gt 20 ]
if [ "$isolated" -ne "$total" ]; then
  fail "$((total - isolated)) of $total tests run without tests/private_tmp.sh:"
  grep -v private_tmp.sh tests.txt | head -5
else
  pass
fi

# Its own folder per command, under the caller's TMPDIR, gone afterwards; status passed on.
mkdir outer
TMPDIR=$work/outer sh "$launcher" sh -c 'echo "$TMPDIR" > seen1; touch "$TMPDIR/x"; exit 3'
check "the command's exit status passes through" [ $? -eq 3 ]
TMPDIR=$work/outer sh "$launcher" sh -c 'echo "$TMPDIR" > seen2'
check "a private TMPDIR inside the caller's" grep -q "^$work/outer/pptrain-test\." seen1
check "a different TMPDIR each time" [ "$(cat seen1)" != "$(cat seen2)" ]
check "the folders are removed afterwards" [ -z "$(ls -A outer)" ]

# Concurrent mpiruns, as ctest -j starts them: each in its own session directory.
if command -v mpirun > /dev/null; then
  for round in 1 2; do
    pids=()
    for j in 1 2 3 4; do
      sh "$launcher" mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 2 \
        sh -c 'echo "$OMPI_COMM_WORLD_RANK $TMPDIR"' > "mpi-$round-$j.txt" 2>&1 &
      pids+=($!)
    done
    ok=0
    for p in "${pids[@]}"; do wait "$p" && ok=$((ok + 1)); done
    check "round $round: 4 concurrent mpiruns all succeed ($ok of 4)" [ "$ok" -eq 4 ]
  done
  check "each job's ranks saw one private TMPDIR" \
    [ "$(cat mpi-1-*.txt | awk '{print $2}' | sort -u | grep -c pptrain-test)" -eq 4 ]
else
  echo "concurrent mpiruns skipped: no mpirun"
fi
cli_finish
