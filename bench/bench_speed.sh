#!/usr/bin/env bash
# pptrain against torch.distributed.pipelining on the CPU: the tables of docs/benchmarks.md.
# Not part of CI (torch is optional). Both train the same Llama model (a preset, or any Hugging
# Face Llama config.json: bench/configs/ holds the issue's ~0.6 M and ~11 M classes) with the same batch,
# schedule and microbatches, P processes with one thread each (pptrain: mpirun
# --transport mpi; torch: gloo), alternating ROUNDS times; the script prints each system's
# median tokens/s, their ratio, each rank's peak RSS, and pptrain's pipelined tokens/s
# against its bound P x (one stage on one core, measured in every round) x (1 - the schedule's
# ideal bubble), and the one stage against its roofline: the model's FLOPs at the rate
# bench_sgemm measures for its products on one core (bench/bench_sgemm --model --rows).
#
# usage: bench/bench_speed.sh [PRESET|CONFIG.json] [P] [BATCH] [SEQ] [M] [ROUNDS] [SCHEDULE]
#        (defaults: small 2 16 256 8 3 1f1b; PYTHON=python with torch and transformers,
#         PPTRAIN=build/pptrain, BENCH_SGEMM=build/bench/bench_sgemm)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-small} P=${2:-2} B=${3:-16} T=${4:-256} M=${5:-8} rounds=${6:-3} sched=${7:-1f1b}
py=${PYTHON:-python3} bin=${PPTRAIN:-build/pptrain} sgemm=${BENCH_SGEMM:-build/bench/bench_sgemm}
steps=5
data=/usr/share/games/fortunes
[ -e "$data" ] || data=tests/fixtures/text
mpi=(mpirun --oversubscribe --mca btl self,vader -x OMP_NUM_THREADS=1)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
run=(train --model "$preset" --data "$data" --batch "$B" --seq "$T" --microbatches "$M" --steps $((steps + 1))
     --schedule "$sched" --db '' --lr 1e-3)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# "done: ... | median X tok/s, ..." -> X
tok_s() { sed -nE 's/^done:.*median ([0-9.]+) tok\/s.*/\1/p' "$1"; }
# "done: ... | median X tok/s, Y GFLOP/s, ..." -> Y
gflop_s() { sed -nE 's/^done:.*median [0-9.]+ tok\/s, ([0-9.]+) GFLOP\/s.*/\1/p' "$1"; }
median() { sort -g | awk '{a[NR] = $1} END {print NR ? (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) : "nan"}'; }

# A misspelled preset or a config.json pptrain refuses stops here, in one line, before any run.
if ! msg=$("$bin" plan --model "$preset" --stages "$P" --microbatches "$M" --seq "$T" --schedule "$sched" 2>&1 > /dev/null); then
  echo "bench_speed.sh: $msg" >&2
  exit 2
fi

have_torch=0 why="not installed ($py)"
$py -c 'import torch, transformers' 2> /dev/null && have_torch=1
case $sched in 1f1b | gpipe) ;; *) have_torch=0 why="bench/torch_pipe.py runs 1f1b and gpipe only" ;; esac
echo "machine: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cores), $(date -u +%F)"
echo "$preset, P=$P $sched, batch $B x $T, M=$M, one thread per rank, $rounds alternating rounds"
# The kernels each side runs (a ONEDNN_MAX_CPU_ISA in the environment holds pptrain's below
# the CPU, while torch's own ones are unaffected).
"$bin" --version | sed -n 's/^ *CPU products: /pptrain: /p'
[ $have_torch = 1 ] && $py -c 'import torch; print("torch", torch.__version__, "CPU capability", torch.backends.cpu.get_cpu_capability())'
for r in $(seq "$rounds"); do
  "${mpi[@]}" -np "$P" /usr/bin/time -f 'rss_kib %M' "$bin" "${run[@]}" --stages "$P" --transport mpi \
    > "$work/pp$r.txt" 2>&1
  tok_s "$work/pp$r.txt" >> "$work/pp.tok"
  # the split's balance: the slowest rank's busy time over the ranks' mean
  sed -n 's/^ *mean busy ms per rank and step://p' "$work/pp$r.txt" |
    awk '{ m = 0; s = 0; for (i = 1; i <= NF; i++) { s += $i; if ($i > m) m = $i } if (NF) print m / (s / NF) }' \
    >> "$work/pp.imbalance"
  grep -o 'rss_kib [0-9]*' "$work/pp$r.txt" | awk '{print $2 / 1024}' >> "$work/pp.rss"
  if [ $have_torch = 1 ]; then
    # gloo's start-up now and then aborts a rank ("terminate called without an active
    # exception"): three more tries, then the script stops with torch's own message.
    for try in 1 2 3 4; do
      $py bench/torch_pipe.py --preset "$preset" --stages "$P" --schedule "$sched" --batch "$B" --seq "$T" \
        --microbatches "$M" --steps $steps > "$work/torch$r.json" 2> "$work/torch$r.err" && break
      [ $try = 4 ] && { tail -n 5 "$work/torch$r.err" >&2; exit 1; }
      echo "torch round $r: a rank failed, trying again" >&2
    done
    $py -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["tokens_per_s"]); [print(x, file=open(sys.argv[2], "a")) for x in d["peak_rss_mib"]]' \
      "$work/torch$r.json" "$work/torch.rss" >> "$work/torch.tok"
  fi
  # the bound's one stage on one core, measured in every round too, so it sees the same load
  OMP_NUM_THREADS=1 "$bin" "${run[@]}" --stages 1 > "$work/one$r.txt" 2>&1
  tok_s "$work/one$r.txt" >> "$work/one.tok"
  gflop_s "$work/one$r.txt" >> "$work/one.gflops"
done
# The bound: one stage on one core (the median of the rounds'), the schedule's ideal bubble from pptrain plan (F=1, B=2,
# W = B/2, the papers' costs), and again with W the model's own weight-gradient share of the
# backward (--cost model): the zero-bubble schedules' ideal depends on it (tiny: W is a small
# part of B, and zb-h1's bubble at P=2, M=8 is 8.4 %, not 4 %).
one=$(median < "$work/one.tok")
ideal=$("$bin" plan --schedule "$sched" --stages "$P" --microbatches "$M" --json |
        sed -nE 's/.*"bubble":([0-9.eE+-]+).*/\1/p')
ideal_model=$("$bin" plan --schedule "$sched" --stages "$P" --microbatches "$M" --model "$preset" --seq "$T" \
              --cost model --json | sed -nE 's/.*"bubble":([0-9.eE+-]+).*/\1/p')
pp=$(median < "$work/pp.tok")
printf 'pptrain (mpi)                 %10.0f tok/s   peak RSS per rank %s MiB\n' "$pp" \
  "$(sort -g "$work/pp.rss" | tail -n "$P" | tr '\n' ' ')"
if [ $have_torch = 1 ]; then
  tp=$(median < "$work/torch.tok")
  printf 'torch.distributed.pipelining  %10.0f tok/s   peak RSS per rank %s MiB\n' "$tp" \
    "$(sort -g "$work/torch.rss" | tail -n "$P" | tr '\n' ' ')"
  awk -v a="$pp" -v b="$tp" 'BEGIN { printf "ratio pptrain / torch        %10.2fx\n", a / b }'
else
  echo "torch.distributed.pipelining: skipped, $why"
fi
awk -v pp="$pp" -v one="$one" -v P="$P" -v ideal="$ideal" -v im="$ideal_model" 'BEGIN {
  bound = P * one * (1 - ideal)
  printf "one stage, one core           %10.0f tok/s\n", one
  printf "bound P x one x (1 - %.4f)   %10.0f tok/s: pptrain reaches %.1f%%\n", ideal, bound, 100 * pp / bound
  bound = P * one * (1 - im)
  printf "  at the model'"'"'s W (1 - %.4f) %10.0f tok/s: pptrain reaches %.1f%%\n", im, bound, 100 * pp / bound }'
# Layers are not cut, so the split can leave one rank more work (on tiny models the last
# stage's LM head and loss weigh a fifth of a layer or more): the slowest rank sets the pace.
imb=$(median < "$work/pp.imbalance")
awk -v pp="$pp" -v one="$one" -v P="$P" -v im="$ideal_model" -v imb="$imb" 'BEGIN {
  bound = P * one * (1 - im) / imb
  printf "  and at the split (slowest rank busy / mean %.3f) %6.0f tok/s: pptrain reaches %.1f%%\n", imb, bound, 100 * pp / bound }'
# The roofline: one stage's model GFLOP/s against the rate its products run at on one core
# here, with nothing else (bench_sgemm at a microbatch's B/M x T rows, each product counted as
# often as a step runs it; attention's products are counted at the same rate).
if [ -x "$sgemm" ]; then
  rate=$(OMP_NUM_THREADS=1 "$sgemm" --model "$preset" --rows $((B / M * T)) | awk '/model rate/ {print $NF}')
  awk -v g="$(median < "$work/one.gflops")" -v r="$rate" 'BEGIN {
    printf "roofline: one stage runs %.1f GFLOP/s, its products %.1f alone: %.1f%%\n", g, r, 100 * g / r }'
else
  echo "roofline: skipped, no $sgemm (cmake --build build --target bench_sgemm)"
fi
