#!/usr/bin/env bash
# Measured vs ideal bubble for every schedule (docs/benchmarks.md, "Measured bubble against the ideal").
# usage: bench/bench_bubble.sh [PPTRAIN] [P] [T]      (defaults: build/pptrain, 2, 256)
# Ideal: `pptrain plan` with F=1, B=2 (zero-bubble schedules: F=I=W=1), interleaved and
# looped with V=2. Measured: `pptrain train` on the tiny preset, packed fortunes, one row per
# microbatch; the median over steps 2..N of 1 - sum(busy) / (P x step wall time).
# Run it on a machine with at least P free cores: ranks sharing a core inflate the bubble.
set -euo pipefail
bin=${1:-build/pptrain}
P=${2:-2}
T=${3:-256}
data=/usr/share/games/fortunes
printf "%-17s %4s %9s %9s\n" schedule M ideal measured
for sched in $("$bin" plan --list | sed -n 's/^| \([^ |]*\) | [0-9].*/\1/p'); do   # the registry
  [ "$sched" = zb-v ] && [ "$P" -lt 2 ] && continue
  cost=1,2; case $sched in zb-*|interleaved-zb|dualpipe-v) cost=1,2,1 ;; esac
  for M in 8 16; do
    ideal=$("$bin" plan --stages "$P" --microbatches "$M" --schedule "$sched" --cost "$cost" --json |
            sed 's/.*"bubble":\([0-9.e-]*\).*/\1/')
    measured=$("$bin" train --data "$data" --batching pack --stages "$P" --schedule "$sched" \
                 --microbatches "$M" --batch "$M" --seq "$T" --steps 9 --db '' |
               sed -n 's/.*| bubble *\([0-9.]*\)%.*/\1/p' | tail -n +2 | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
    awk -v s="$sched" -v m="$M" -v i="$ideal" -v x="$measured" 'BEGIN { printf "%-17s %4d %8.1f%% %8.1f%%\n", s, m, 100 * i, x }'
  done
done
