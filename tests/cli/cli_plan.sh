#!/usr/bin/env bash
# `pptrain plan`: output for every schedule, --json numbers, CSV dump and reload, and the
# one-line exit-2 error for each kind of bad input.
# Usage: bash tests/cli/cli_plan.sh PATH_TO_pptrain SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"

# expect_ok NAME ARGS...: exit 0; stdout in $work/out.
expect_ok() {
    local name=$1; shift
    if "$bin" plan "$@" >"$work/out" 2>"$work/err"; then pass; else fail "$name: exit $? ($(cat "$work/err"))"; fi
}

# expect_contains NAME TEXT: $work/out contains TEXT.
expect_contains() {
    if grep -qF -- "$2" "$work/out"; then pass; else fail "$1: output lacks '$2'"; cat "$work/out" >&2; fi
}

# expect_fail NAME WANT ARGS...: exit 2, nothing on stdout, one stderr line "pptrain: ..." containing WANT.
expect_fail() {
    local name=$1 want=$2; shift 2
    "$bin" plan "$@" >"$work/out" 2>"$work/err"
    local rc=$?
    local lines
    lines=$(wc -l <"$work/err")
    if [ "$rc" -eq 2 ] && [ ! -s "$work/out" ] && [ "$lines" -eq 1 ] && grep -q '^pptrain: ' "$work/err" \
        && grep -qF -- "$want" "$work/err"; then
        pass
    else
        fail "$name: rc=$rc, stderr '$(cat "$work/err")', stdout $(wc -c <"$work/out") bytes, want '$want'"
    fi
}

# json_field NAME: the value of a top-level scalar field in $work/out.
json_field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" "$work/out"; }

# --- output --------------------------------------------------------------------------------
expect_ok "1f1b text" --stages 4 --microbatches 8 --schedule 1f1b --cost 1,2
expect_contains "1f1b text" "bubble 27.27%  makespan 33  messages 48"
expect_contains "1f1b text" "peak activations per stage: 4,3,2,1"
expect_contains "1f1b text" "rank 0   |FFFF......BBFBBFBBFBBFBB.BB.BB.BB|"
expect_contains "1f1b text" "rank 3   |...FBBFBBFBBFBBFBBFBBFBBFBB......|"
expect_contains "1f1b text" "layers per stage: 2,2,2,2"

# --- the registry: every row plans; README.md holds the table; help and errors list it ------
expect_ok "list" --list
cp "$work/out" "$work/registry.md"
names=$(sed -n 's/^| \([^ |]*\) | [0-9].*/\1/p' "$work/registry.md")
if [ "$(echo "$names" | wc -l)" -ge 6 ] && echo "$names" | grep -qx zb-v; then pass
else fail "plan --list names: '$names'"; fi
grep -A "$(($(wc -l <"$work/registry.md") - 1))" -xF "$(head -1 "$work/registry.md")" "$src/README.md" \
    >"$work/readme.md"
if cmp -s "$work/registry.md" "$work/readme.md"; then pass
else fail "README.md's schedule table differs from plan --list: $(diff "$work/registry.md" "$work/readme.md")"; fi
for s in $names; do
    expect_ok "$s runs" --stages 4 --microbatches 8 --schedule "$s"
    expect_contains "$s runs" "bubble "
    expect_ok "help lists $s" --help
    expect_contains "help lists $s" "$s"
    expect_fail "unknown schedule lists $s" "$s" --stages 4 --microbatches 8 --schedule 2f2b
done

# The split plan prints is the one train makes (model costs, not flat ones).
for case in "small 256 3" "tiny 64 4"; do
    read -r model T P <<<"$case"
    expect_ok "split $case" --stages "$P" --microbatches 4 --model "$model" --seq "$T"
    plan_split=$(sed -n 's/^layers per stage: //p' "$work/out" | tr , ' ')
    "$bin" train --data "$src/tests/fixtures/text" --model "$model" --seq "$T" --stages "$P" --microbatches 4 \
        --batch 4 --steps 1 --db '' >"$work/train" 2>&1
    train_split=$(sed -n 's/^  layers per stage: //p' "$work/train")
    if [ -n "$plan_split" ] && [ "$plan_split" = "$train_split" ]; then pass
    else fail "$case: plan splits '$plan_split', train '$train_split'"; fi
done

# Paper numbers for P=4, M=8: (P-1)/(M+P-1) = 3/11; interleaved V=2 (P-1)/(VM+P-1) = 3/19;
# zb-h1 with F=I=W (P-1)/(3M+P-1) = 1/9; zb-v the fill bound (P-1)/(6M+P-1) = 1/17.
check_bubble() {
    local name=$1 want=$2; shift 2
    expect_ok "$name json" --stages 4 --microbatches 8 --json "$@"
    local got
    got=$(json_field bubble)
    if awk -v g="$got" -v w="$want" 'BEGIN { d = g - w; exit !(d < 1e-12 && d > -1e-12) }'; then pass
    else fail "$name: bubble $got, want $want"; fi
}
check_bubble gpipe 0.27272727272727271 --schedule gpipe --cost 1,2
check_bubble 1f1b 0.27272727272727271 --schedule 1f1b --cost 1,2
check_bubble interleaved 0.15789473684210525 --schedule interleaved-1f1b --cost 1,2
check_bubble zb-h1 0.1111111111111111 --schedule zb-h1 --cost 1,2,1
check_bubble zb-v 0.058823529411764705 --schedule zb-v --cost 1,2,1
# interleaved zero bubble V=2 (P-1)/(3VM+P-1) and DualPipeV (its pairs timed F then B): 1/17 too.
check_bubble interleaved-zb 0.058823529411764705 --schedule interleaved-zb --cost 1,2,1
check_bubble dualpipe-v 0.058823529411764705 --schedule dualpipe-v --cost 1,2,1

expect_ok "json shape" --stages 4 --microbatches 8 --schedule zb-v --json
for key in '"schedule":"zb-v"' '"stages":4' '"microbatches":8' '"virtual":2' '"makespan":25.5' \
    '"peak_activations":[8,7,6,5,4,3,2,1]' '"messages":96'; do
    expect_contains "json shape" "$key"
done

expect_ok "dualpipe-v text" --stages 4 --microbatches 8 --schedule dualpipe-v
expect_contains "dualpipe-v text" "dualpipe-v: 4 ranks, 8 stages, 8 microbatches"
expect_contains "dualpipe-v text" "rank 0   |FFFFFFFFIWFIWFIWFFBBFBBBBF.BBBBF.BBBBF.BBBBIWIWIWIW|"
expect_contains "dualpipe-v text" "peak activations per stage: 8,7,6,5,4,3,2,1"

# --- CSV dump and reload -------------------------------------------------------------------
for s in 1f1b interleaved-1f1b zb-h1 zb-v interleaved-zb dualpipe-v; do
    expect_ok "$s dump" --stages 4 --microbatches 8 --schedule "$s" --dump-csv
    cp "$work/out" "$work/$s.csv"
    expect_ok "$s builtin json" --stages 4 --microbatches 8 --schedule "$s" --json
    sed 's/"schedule":"[^"]*",//' "$work/out" >"$work/a.json"
    expect_ok "$s csv json" --schedule "$work/$s.csv" --json
    sed 's/"schedule":"[^"]*",//' "$work/out" >"$work/b.json"
    if cmp -s "$work/a.json" "$work/b.json"; then pass; else fail "$s: CSV reload simulates differently"; fi
done
if [ "$(wc -l <"$work/1f1b.csv")" -eq 4 ] && head -1 "$work/1f1b.csv" | grep -q '^0F0,0F1,0F2,0F3,0B0,'; then pass
else fail "1f1b CSV rows: $(head -1 "$work/1f1b.csv")"; fi
expect_ok "with comm" --stages 2 --microbatches 2 --schedule 1f1b --dump-csv --with-comm
# torch's compute_comms form, as torch's own lowering writes this order: FSDP's UNSHARD /
# RESHARD, receives posted early, a WAIT_SEND after each send, REDUCE_GRAD.
expect_contains "with comm" "0UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,0WAIT_SEND_F1,0REDUCE_GRAD,0WAIT_REDUCE_GRAD,0RESHARD"
expect_contains "with comm" "1UNSHARD,1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1REDUCE_GRAD,1WAIT_REDUCE_GRAD,1RESHARD,1WAIT_SEND_B0,1WAIT_SEND_B1"

# --- bad input: one line, exit 2 -----------------------------------------------------------
expect_fail "unknown schedule" "unknown schedule '2f2b'" --stages 4 --microbatches 8 --schedule 2f2b
expect_fail "P < 1" "--stages: 0 is out of range" --stages 0 --microbatches 8
expect_fail "M < 1" "--microbatches: 0 is out of range" --stages 4 --microbatches 0
expect_fail "M not a number" "--microbatches: 'x' is not an integer" --stages 4 --microbatches x
expect_fail "missing P" "--stages and --microbatches are required" --microbatches 8
expect_fail "missing value" "--stages needs a value" --microbatches 8 --stages
expect_fail "unknown option" "unknown option '--stage'" --stage 4
expect_fail "zb-v V" "--virtual must be 2, not 3" --stages 2 --microbatches 4 --schedule zb-v --virtual 3
expect_fail "1f1b V" "--virtual must be 1, not 2" --stages 2 --microbatches 4 --schedule 1f1b --virtual 2
expect_fail "interleaved layers" "16 stages (4 ranks x 4 per rank) need at least 16 layers, --layers is 8" \
    --stages 4 --microbatches 8 --schedule interleaved-1f1b --virtual 4
expect_fail "zb-v layers" "need at least 16 layers" --stages 8 --microbatches 16 --schedule zb-v
expect_fail "plain layers" "need at least 4 layers, --layers is 2" --stages 4 --microbatches 8 --layers 2
expect_fail "interleaved M" "multiple" --stages 4 --microbatches 9 --schedule interleaved-1f1b
expect_fail "interleaved-zb M" "multiple" --stages 4 --microbatches 9 --schedule interleaved-zb
expect_fail "dualpipe-v M" "dualpipe-v needs at least 1 microbatch per stage: 4 ranks x 2 stages need M >= 8, not 6; use --microbatches 8 or more, or --stages 3 or fewer for 6 microbatches" \
    --stages 4 --microbatches 6 --schedule dualpipe-v
expect_fail "dualpipe-v V" "--virtual must be 2, not 3" --stages 2 --microbatches 4 --schedule dualpipe-v --virtual 3
expect_fail "cost count" "--cost: '1' needs F,B or F,B,W" --stages 2 --microbatches 2 --cost 1
expect_fail "cost text" "--cost: 'a' is not a number" --stages 2 --microbatches 2 --cost 1,a
expect_fail "cost W >= B" "below the backward time" --stages 2 --microbatches 2 --cost 1,2,2
expect_fail "cost zero" "must be positive" --stages 2 --microbatches 2 --cost 0,2
expect_fail "cost four" "more than 3 values" --stages 2 --microbatches 2 --cost 1,2,1,1
expect_fail "with-comm alone" "--with-comm only applies to --dump-csv" --stages 2 --microbatches 2 --with-comm
expect_fail "unreadable csv" "--schedule: $work/none.csv: no such file" --schedule "$work/none.csv"
{ printf '\357\273\277'; cat "$work/1f1b.csv"; } >"$work/bom.csv"   # saved by a spreadsheet as "CSV UTF-8"
expect_ok "csv with a byte order mark" --schedule "$work/bom.csv"
expect_contains "csv with a byte order mark" "rank 3   |"
printf '0F0,0Q1\n' >"$work/bad.csv"
expect_fail "malformed csv" "bad.csv:1:5: bad action '0Q1'" --schedule "$work/bad.csv"
printf '0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n' >"$work/dead.csv"
expect_fail "deadlock csv" "deadlock" --schedule "$work/dead.csv"
expect_fail "csv vs --stages" "--stages 3, but $work/1f1b.csv has 4 ranks" --schedule "$work/1f1b.csv" --stages 3
expect_fail "csv vs --microbatches" "--microbatches 9, but" --schedule "$work/1f1b.csv" --microbatches 9

# --- --from-run: a run's measured stage times rank every registry layout -------------------
"$bin" train --data "$src/tests/fixtures/text" --stages 2 --schedule 1f1b --microbatches 4 --batch 8 --seq 32 \
    --steps 3 --db "$work/runs.db" >"$work/train" 2>&1 || fail "train for --from-run: $(tail -1 "$work/train")"
expect_ok "from-run" --from-run latest --db "$work/runs.db" --top 100
expect_contains "from-run" "run 1: 1f1b, P 2, V 1, M 4, layers per stage"
expect_contains "from-run" "predicted: step "
for s in $names; do expect_contains "from-run offers $s" " $s "; done
expect_ok "from-run json" --from-run 1 --db "$work/runs.db" --json --top 1
for key in '"run":1' '"measured":{"schedule":"1f1b","stages":2' '"predicted":{"schedule":"1f1b"' '"layouts":[{'; do
    expect_contains "from-run json" "$key"
done
# A data-parallel run: a stage's busy time is one replica's, so the plan predicts the step it
# measured (summed over the replicas it predicted about twice the step). 25 %: the machine may
# be shared with other tests; the error this catches is 100 %.
"$bin" train --data "$src/tests/fixtures/text" --stages 1 --dp 2 --microbatches 4 --batch 16 --seq 64 \
    --steps 8 --db "$work/dp.db" >"$work/train-dp" 2>&1 || fail "dp train for --from-run: $(tail -1 "$work/train-dp")"
"$bin" plan --from-run 1 --db "$work/dp.db" --json --top 1 > "$work/dp.json"
measured=$(grep -o '"measured":{[^}]*' "$work/dp.json" | grep -o '"step_ms":[0-9.e+-]*' | cut -d: -f2)
predicted=$(grep -o '"predicted":{[^}]*' "$work/dp.json" | grep -o '"step_ms":[0-9.e+-]*' | cut -d: -f2)
check "P1 D2: predicted step $predicted ms within 25 % of the measured $measured ms" \
  awk -v p="$predicted" -v m="$measured" 'BEGIN { r = p / m; exit !(m > 0 && r > 0.75 && r < 1.25) }'
expect_fail "from-run unknown run" "no run 9" --from-run 9 --db "$work/runs.db"
expect_fail "from-run bad id" "'x1'" --from-run x1 --db "$work/runs.db"
expect_fail "from-run no store" "none.db" --from-run 1 --db "$work/none.db"
expect_fail "from-run dump" "choose one" --from-run 1 --db "$work/runs.db" --dump-csv
expect_fail "db alone" "--db only applies to --from-run" --stages 2 --microbatches 2 --db "$work/runs.db"
expect_fail "top alone" "--top only applies to --from-run" --stages 2 --microbatches 2 --top 3
# --from-run searches the layouts itself: a layout or cost flag beside it would be ignored.
from_run_line="does not apply to --from-run: it ranks every schedule, V, M and split for the run's own model and \
stages at its measured costs"
expect_fail "from-run --stages" "pptrain: --stages $from_run_line" --from-run 1 --stages 4 --db "$work/runs.db"
check "from-run --stages: exactly that line" [ "$(cat "$work/err")" = "pptrain: --stages $from_run_line" ]
for flag in "--microbatches 8" "--schedule zb-v" "--virtual 2" "--cost 1,2" "--latency 1" "--model tiny" "--seq 32" \
    "--layers 4"; do
    expect_fail "from-run $flag" "pptrain: ${flag%% *} $from_run_line" --from-run 1 --db "$work/runs.db" $flag
done
expect_ok "from-run with --json and --top" --from-run 1 --db "$work/runs.db" --json --top 2
# A run that stopped before its first step, and one with a step but no configuration.
sqlite3 "$work/runs.db" "INSERT INTO runs (started_at, status, schedule, stages, config_json)
    SELECT started_at, 'stopped', schedule, stages, config_json FROM runs WHERE id = 1;
    INSERT INTO runs (started_at, status) VALUES ('2025-01-01', 'stopped');
    INSERT INTO steps (run_id, step, step_ms, bubble) VALUES (3, 1, 10, 0.1);
    INSERT INTO stage_steps (run_id, step, stage, rank, busy_ms) VALUES (3, 1, 0, 0, 9)" || fail "sqlite3 insert"
expect_fail "from-run without steps" "run 2 has no measured steps" --from-run 2 --db "$work/runs.db"
expect_fail "from-run without config" "run 3 has no stored configuration" --from-run 3 --db "$work/runs.db"
# A CSV schedule brings its own stage count (zb-v's 4 stages on 2 ranks).
"$bin" plan --stages 2 --microbatches 4 --schedule zb-v --dump-csv >"$work/v.csv"
"$bin" train --data "$src/tests/fixtures/text" --stages 2 --schedule "$work/v.csv" --microbatches 4 --batch 8 \
    --seq 32 --steps 2 --db "$work/runs.db" >"$work/train" 2>&1 || fail "train v.csv: $(tail -1 "$work/train")"
expect_ok "from-run csv" --from-run latest --db "$work/runs.db"
expect_contains "from-run csv" "v.csv, P 2, V 2, M 4, layers per stage"

expect_ok "help" --help
expect_contains "help" "--schedule NAME|FILE.csv"

# --cost model: W is the model's weight-gradient share of B. 1F1B does not split B, so its
# bubble is the papers' 1/9; zb-h1's grows past the formula's 4 % as W shrinks (tiny: W is a
# small part of the backward), and equals an explicit --cost with a smaller W's ordering.
bubble_of() { "$bin" plan --stages 2 --microbatches 8 --json "$@" | sed -nE 's/.*"bubble":([0-9.eE+-]+).*/\1/p'; }
b1=$(bubble_of --schedule 1f1b --model tiny --seq 64 --cost model)
bz=$(bubble_of --schedule zb-h1 --model tiny --seq 64 --cost model)
bw=$(bubble_of --schedule zb-h1 --cost 1,2,0.2)
check "--cost model: 1f1b keeps 1/9" awk -v b="$b1" 'BEGIN { exit !(b > 0.11110 && b < 0.11112) }'
check "--cost model: tiny's zb-h1 bubble lies between W=B/2's 4 % and W=0.1 B's" \
  awk -v b="$bz" -v w="$bw" 'BEGIN { exit !(b > 0.0401 && b < w) }'
expect_fail "--cost with a word" "needs F,B, F,B,W or model" --cost modl

# --- bench/configs: the Hugging Face config.json files bench/bench_speed.sh compares on -----
for cfg in "$src"/bench/configs/*.json; do
    expect_ok "$(basename "$cfg") plans" --model "$cfg" --stages 2 --microbatches 8 --seq 256 --cost model --json
    layers=$(sed -n 's/.*"num_hidden_layers": *\([0-9]*\).*/\1/p' "$cfg")
    split=$(sed -n 's/.*"layers_per_stage":\[\([0-9,]*\)\].*/\1/p' "$work/out")
    check "$(basename "$cfg"): the split ($split) holds its $layers layers" \
        test "$((${split//,/+}))" = "$layers"
done

# A schedule loaded from its own --dump-csv plans as the built-in does (issue 29): looped BFS's
# reversed backward is put in microbatch order before the messages are placed, so the file
# keeps the built-in's timeline (it planned 51.0% against 15.8% at P4 M8 V2 before).
shape=(--stages 4 --microbatches 8 --virtual 2)
bubble_of() { "$bin" plan "$@" | grep -o 'bubble [0-9.]*%  makespan [0-9.]*' | head -1; }
for name in looped-bfs interleaved-1f1b zb-v; do
  "$bin" plan --schedule $name "${shape[@]}" --dump-csv > "$work/$name.csv"
  "$bin" plan --schedule $name "${shape[@]}" --dump-csv --with-comm > "$work/$name-comm.csv"
  want=$(bubble_of --schedule $name "${shape[@]}")
  check "$name from its own CSV plans the built-in's $want" [ "$(bubble_of --schedule "$work/$name.csv")" = "$want" ]
  check "$name from its own CSV with messages, too" [ "$(bubble_of --schedule "$work/$name-comm.csv")" = "$want" ]
done

cli_finish
