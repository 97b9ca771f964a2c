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
expect_contains "1f1b text" "layers per stage: 1,2,3,2"

for s in gpipe 1f1b interleaved-1f1b looped-bfs zb-h1 zb-v; do
    expect_ok "$s runs" --stages 4 --microbatches 8 --schedule "$s"
    expect_contains "$s runs" "bubble "
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

expect_ok "json shape" --stages 4 --microbatches 8 --schedule zb-v --json
for key in '"schedule":"zb-v"' '"stages":4' '"microbatches":8' '"virtual":2' '"makespan":25.5' \
    '"peak_activations":[8,7,6,5,4,3,2,1]' '"messages":96'; do
    expect_contains "json shape" "$key"
done

# --- CSV dump and reload -------------------------------------------------------------------
for s in 1f1b interleaved-1f1b zb-h1 zb-v; do
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
expect_fail "cost count" "--cost: '1' needs F,B or F,B,W" --stages 2 --microbatches 2 --cost 1
expect_fail "cost text" "--cost: 'a' is not a number" --stages 2 --microbatches 2 --cost 1,a
expect_fail "cost W >= B" "below the backward time" --stages 2 --microbatches 2 --cost 1,2,2
expect_fail "cost zero" "must be positive" --stages 2 --microbatches 2 --cost 0,2
expect_fail "cost four" "more than 3 values" --stages 2 --microbatches 2 --cost 1,2,1,1
expect_fail "with-comm alone" "--with-comm only applies to --dump-csv" --stages 2 --microbatches 2 --with-comm
expect_fail "unreadable csv" "$work/none.csv: cannot open schedule" --schedule "$work/none.csv"
printf '0F0,0Q1\n' >"$work/bad.csv"
expect_fail "malformed csv" "bad.csv:1:5: bad action '0Q1'" --schedule "$work/bad.csv"
printf '0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n' >"$work/dead.csv"
expect_fail "deadlock csv" "deadlock" --schedule "$work/dead.csv"
expect_fail "csv vs --stages" "--stages 3, but $work/1f1b.csv has 4 ranks" --schedule "$work/1f1b.csv" --stages 3
expect_fail "csv vs --microbatches" "--microbatches 9, but" --schedule "$work/1f1b.csv" --microbatches 9

expect_ok "help" --help
expect_contains "help" "--schedule NAME|FILE.csv"

cli_finish
