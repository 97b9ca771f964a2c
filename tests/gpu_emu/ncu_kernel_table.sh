#!/usr/bin/env bash
# tests/gpu_emu/ncu_kernel_table.sh: bench/ncu_kernel_table.awk, which turns Nsight Compute's CSV
# of one training step into bench/gpu_check.sh's "where the step's time goes" table, read on a
# hand-made CSV in ncu's long form (tests/fixtures/ncu/step.csv: the program's output and ncu's
# ==PROF== lines first, values with thousands separators, every time unit, a second metric, a
# row with a unit ncu never prints). No GPU or ncu here: on the day one is lent, a table that
# cannot be read would waste the lease, so its reading is proven first.
# usage: ncu_kernel_table.sh PPTRAIN_EMU SOURCE_DIR   (the binary is not used)
source "$(dirname "$0")/../cli/lib_cli.sh" "$@"

table() { awk -f "$src/bench/ncu_kernel_table.awk" "$@"; }
csv=$src/tests/fixtures/ncu/step.csv

# The totals: 12.48 + 231.52 + 1500 + 268.48 + 1500 + 20 + 7.52 us = 3.540 ms over 7 launches,
# the largest first, the unknown unit skipped and said.
out=$(table "$csv")
want='  share   total ms  launches    mean us  kernel
  84.7%      3.000         2     1500.0  flash_mma_forward_kernel
  14.1%      0.500         2      250.0  nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN
   0.6%      0.020         1       20.0  adamw_kernel
   0.4%      0.012         1       12.5  embedding_forward_kernel
   0.2%      0.008         1        7.5  rmsnorm_forward_kernel
 100.0%      3.540         7             all kernels (1 rows with an unknown unit or value skipped)'
check "the whole table" [ "$out" = "$want" ]
[ "$out" = "$want" ] || diff <(echo "$want") <(echo "$out")

out=$(table -v top=2 "$csv")
check "top 2, then the rest in one line" grep -q -F '   1.1%      0.040         3             (3 other kernels)' <<< "$out"
check "top 2 prints 2 kernels" [ "$(grep -c '_kernel$\|_TNN$' <<< "$out")" = 2 ]

out=$(table -v summary=1 "$csv")
check "the one-line summary" [ "$out" = '7 launches, 3.54 ms; flash_mma_forward_kernel 85%, nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN 14%, adamw_kernel 1%' ]

# Columns are found by name: the same rows with the columns in another order read the same.
reordered=$(awk -F'","' -v OFS='","' '/^"/ { sub(/^"/, "", $1); sub(/"$/, "", $NF);
  t = $5; $5 = $15; $15 = t; print "\"" $0 "\""; next } { print }' "$csv")
check "columns found by their header" [ "$(table <<< "$reordered")" = "$(table "$csv")" ]

# Windows line ends read the same.
check "CRLF lines" [ "$(sed 's/$/\r/' "$csv" | table)" = "$(table "$csv")" ]

# What is not ncu's CSV says so in one line and exits 1.
out=$(echo "step 1/1 | loss 10.4" | table)
check "no header: exit 1" [ $? -eq 1 ]
check "no header: one line" [ "$out" = 'no Nsight Compute CSV header ("Kernel Name", "Metric Value") in the input' ]
out=$(head -5 "$csv" | table)
check "header, no rows: exit 1" [ $? -eq 1 ]
check "header, no rows: one line" [ "$out" = 'no gpu__time_duration.sum rows in the input' ]
cli_finish
