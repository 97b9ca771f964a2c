#!/usr/bin/env bash
# `pptrain history` against a store built from `pptrain history schema` and filled with the
# sqlite3 shell: list (filters, --json), show (sparkline, stages, checkpoints), compare,
# export (CSV, JSON, --out), crashed runs, reads that change nothing, and every bad input:
# one line on stderr, exit code 2, nothing on stdout.
# usage: cli_history.sh PPTRAIN SOURCE_DIR
source "$(dirname "$0")/lib_cli.sh" "$@"

# check "what" COMMAND...: the command exits 0 (its stdout is left in out.txt).
check_ok() {
  local what=$1
  shift
  "$@" >out.txt 2>err.txt
  local code=$?
  if [ $code -eq 0 ] && [ ! -s err.txt ]; then pass; else fail "$what: exit $code"; cat err.txt; fi
}

# expect_text "what" PATTERN: out.txt contains the extended regex.
expect_text() {
  if grep -Eq -- "$2" out.txt; then pass; else fail "$1: no '$2' in:"; cat out.txt; fi
}

expect_no_text() {
  if grep -Eq -- "$2" out.txt; then fail "$1: '$2' should not appear in:"; cat out.txt; else pass; fi
}

json_ok() {   # json_ok "what" FILE [SQL expression over j that must be 1]
  local got
  got=$(sqlite3 :memory: "SELECT json_valid(readfile('$2'))${3:+ AND ($3)} FROM (SELECT readfile('$2') AS j)")
  if [ "$got" = 1 ]; then pass; else fail "$1: not valid JSON or ${3:-?} failed:"; head -c 600 "$2"; echo; fi
}

expect_error() {   # expect_error "what it should mention" args...
  local want=$1
  shift
  "$bin" history "$@" >stdout.txt 2>stderr.txt
  local code=$?
  local lines
  lines=$(wc -l < stderr.txt)
  if [ "$code" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$want" stderr.txt && [ ! -s stdout.txt ]; then
    pass
  else
    fail "pptrain history $* -> exit $code, $lines stderr lines (want 2, 1 line mentioning '$want')"
    cat stderr.txt
  fi
  rm -f stdout.txt stderr.txt
}

# ---- a store: three finished or failed runs, one crashed, one live ----------------------
"$bin" history schema > schema.sql
if sqlite3 runs.db < schema.sql; then pass; else fail "history schema is not valid SQL"; fi
sleep 0 & dead_pid=$!
wait $dead_pid
sqlite3 runs.db <<EOF
INSERT INTO runs (id, started_at, ended_at, status, schedule, stages, virtual, dp, microbatches, batch, seq_len,
                  model, params, lr, seed, transport, device, config_json, steps_planned)
VALUES (1, '2025-03-01T14:02:07.123Z', '2025-03-01T14:05:00.000Z', 'finished', '1f1b', 4, 1, 1, 8, 16, 128, 'tiny',
        330000, 0.003, 1337, 'local', 'cpu',
        '{"model":{"name":"tiny","layers":8},"pipeline":{"schedule":"1f1b","recompute":false},"steps":200}', 200),
       (2, '2025-03-02T09:00:00.000Z', '2025-03-02T09:03:00.000Z', 'finished', 'zb-h1', 4, 1, 1, 8, 16, 128, 'tiny',
        330000, 0.003, 1337, 'local', 'cpu',
        '{"model":{"name":"tiny","layers":8},"pipeline":{"schedule":"zb-h1","recompute":true},"steps":200,
          "data":"/corpus"}', 200),
       (3, '2025-03-03T09:00:00.000Z', '2025-03-03T09:00:05.000Z', 'failed', 'gpipe', 2, 1, 2, 4, 16, 128, 'tiny',
        330000, 0.001, 7, 'mpi', 'cpu', NULL, 100);
UPDATE runs SET error = 'rank 1 stage 1: timed out waiting for RECV_F mb 3' WHERE id = 3;
UPDATE runs SET host_cores = 2, host_ranks = 4 WHERE id = 1;
INSERT INTO runs (id, started_at, status, schedule, stages, virtual, dp, microbatches, batch, seq_len, model,
                  steps_planned, host, pid, heartbeat_at)
VALUES (4, '2025-03-04T09:00:00.000Z', 'running', '1f1b', 2, 1, 1, 2, 4, 32, 'tiny', 50, '$(hostname)', $dead_pid,
        '2025-03-04T09:00:09.000Z'),
       (5, '2025-03-05T09:00:00.000Z', 'running', '1f1b', 2, 1, 1, 2, 4, 32, 'tiny', 50, '$(hostname)', $$,
        '2025-03-05T09:00:09.000Z');
WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 200)
INSERT INTO steps (run_id, step, loss, lr, grad_norm, tokens_per_s, step_ms, bubble, gflops)
SELECT r, n, 2.4 + 3.2 * exp(-n / 30.0) + (r - 1) * 0.01, 0.003, 1.0, 19000 + n + r * 100, 100,
       CASE r WHEN 1 THEN 0.2 ELSE 0.1 END, 50
FROM s, (SELECT 1 AS r UNION SELECT 2);
WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 200),
     st(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM st WHERE k < 3)
INSERT INTO stage_steps (run_id, step, stage, rank, busy_ms, between_ms, sendrecv_ms, peak_act_bytes, transfer_ms, wait_ms)
SELECT 1, n, k, k, 70 + k, 20, 10 - k, 1048576 * (4 - k), 1, 29 - 2 * k FROM s, st;
UPDATE steps SET bubble_ideal = 0.1, bubble_imbalance = 0.05, bubble_transfer = 0.02, bubble_contention = 0.03
WHERE run_id = 1;
INSERT INTO checkpoints (id, run_id, step, dir, created_at, bytes, status)
VALUES (1, 1, 100, 'ckpt/run1/step-100', '2025-03-01T14:03:30.000Z', 3145728, 'complete'),
       (2, 1, 200, 'ckpt/run1/step-200', '2025-03-01T14:04:59.000Z', 0, 'writing');
INSERT INTO checkpoint_files VALUES
  (1, 'model-00001-of-00002.safetensors', 1048576, '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef', 0),
  (1, 'model-00002-of-00002.safetensors', 2097152, '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef', 1);
EOF
before=$(md5sum runs.db)

# ---- list ---------------------------------------------------------------------------------
check_ok "help" "$bin" history --help
expect_text "help names schema" "^  schema "
check_ok "list" "$bin" history --db runs.db
expect_text "list header" "id +started +status +schedule +P +V +D +M +steps +last loss +med tok/s +bubble"
expect_text "run 1 row" "^ +1 +2025-03-0[12] [0-9:]{8} +finished +1f1b +4 +1 +1 +8 +200/200 +2\.4041 +19201 +20\.0%"
expect_text "run 3 failed" "^ +3 .* failed +gpipe +2 +1 +2 +4 +0/100 +- +- +-"
expect_text "dead writer shows as crashed" "^ +4 .* crashed "
expect_text "live writer shows as running" "^ +5 .* running "
if [ "$(grep -Ec '^ +[0-9]+ ' out.txt)" -eq 5 ]; then pass; else fail "list shows 5 runs"; cat out.txt; fi
if [ "$(sed -n 2p out.txt | awk '{print $1}')" = 5 ]; then pass; else fail "newest first"; fi
check_ok "list verb" "$bin" history list --db runs.db --schedule zb-h1
expect_text "schedule filter" "^ +2 "
expect_no_text "schedule filter" "^ +1 "
check_ok "status filter" "$bin" history --db runs.db --status failed
expect_text "status filter" "^ +3 "
expect_no_text "status filter" "^ +[1245] "
check_ok "crashed filter" "$bin" history --db runs.db --status crashed
expect_text "crashed filter" "^ +4 "
expect_no_text "crashed filter" "^ +5 "
check_ok "since filter" "$bin" history --db runs.db --since 2025-03-02T12:00Z
expect_text "since filter" "^ +3 "
expect_no_text "since filter" "^ +[12] "
check_ok "limit" "$bin" history --db runs.db --limit 2
if [ "$(grep -Ec '^ +[0-9]+ ' out.txt)" -eq 2 ]; then pass; else fail "--limit 2"; cat out.txt; fi
check_ok "no match" "$bin" history --db runs.db --schedule zb-v
expect_text "no match line" "^no runs in runs.db match$"
check_ok "list json" "$bin" history --db runs.db --json
json_ok "list json" out.txt "json_array_length(j) = 5 AND json_extract(j, '\$[4].median_tokens_per_s') = 19201 \
  AND json_extract(j, '\$[1].status') = 'crashed' AND json_extract(j, '\$[4].seed') = 1337"

# ---- show ---------------------------------------------------------------------------------
check_ok "show" env LC_ALL=C.UTF-8 "$bin" history show 1 --db runs.db
expect_text "show header" "^run 1  finished$"
expect_text "duration" "ended .*\(2m53s\)"
expect_text "config" "schedule 1f1b   P 4  V 1  D 1  M 8"
expect_text "config json" "^      layers: 8$"
expect_text "loss summary" "200 steps: first 5\.4951, last 2\.4041, min 2\.4041 \(step 200\)"
expect_text "unicode sparkline" "^  █▇.*▁+   2\.404 \.\. 5\.395$"
# One word per idea (issue 29): a rank's step is busy + xfer + wait, wait its share of the
# bubble, and the bubble's fourth part is contention here as in compare and on the console.
expect_text "stage columns: busy, xfer, wait" "^  stage +ranks +busy ms +xfer ms +wait ms +busy +peak act MiB$"
expect_text "stage 2" "^ +2 +1 +72\.00 +1\.00 +25\.00 +72\.0% +2\.0$"
expect_text "the bubble's parts add up" "^  bubble 20\.0% = 10\.0 ideal \+ 5\.0 imbalance \+ 2\.0 transfer \+ 3\.0 contention$"
expect_text "the host's load" "^  4 rank threads on 2 cores: CPU oversubscription$"
# Stored relative (as before dirs were stored absolute): shown resolved against the store's folder.
expect_text "complete checkpoint" "^ +1 +100  complete +2 +3\.0 .* /.*/ckpt/run1/step-100$"
expect_text "writing checkpoint" "^ +2 +200  writing "
check_ok "show ascii" env LC_ALL=C "$bin" history show 1 --db runs.db
expect_text "ascii sparkline without UTF-8" "^  #\*.*_+   2\.404"
check_ok "show --ascii" env LC_ALL=C.UTF-8 "$bin" history show 1 --db runs.db --ascii
expect_no_text "--ascii" "█"
check_ok "show latest" "$bin" history show latest --db runs.db
expect_text "latest is run 5" "^run 5  running$"
check_ok "show failed" "$bin" history show 3 --db runs.db
expect_text "error line" "error +rank 1 stage 1: timed out"
expect_text "no steps" "no steps recorded"
check_ok "flags before the verb" "$bin" history --db runs.db show 1
expect_text "flags before the verb" "^run 1  finished$"
check_ok "flags around the verb" "$bin" history --json compare 1 --db runs.db 2
check_ok "show json" "$bin" history show 1 --db runs.db --json
json_ok "show json" out.txt "json_extract(j, '\$.run.config.model.layers') = 8 AND json_array_length(j, '\$.stages') = 4 \
  AND json_extract(j, '\$.checkpoints[0].files') = 2 AND json_extract(j, '\$.stages[3].busy_frac') = 0.73"

# ---- compare ------------------------------------------------------------------------------
check_ok "compare" "$bin" history compare 1 2 3 --db runs.db
expect_text "columns" "^ +run 1 +run 2 +run 3$"
expect_text "schedule differs" "^\* schedule +1f1b +zb-h1 +gpipe$"
expect_text "batch same" "^  batch +16 +16 +16$"
expect_text "final loss differs" "^\* final loss +2\.4041 +2\.4141 +-$"
expect_text "a config field that differs" "^\* recompute +false +true +\?$"
expect_text "a config field only one run has" "^\* data +- +/corpus +\?$"
expect_no_text "config fields that agree stay out" "layers"
expect_text "peak memory" "^\* peak act +4\.0 MiB +- +-$"
expect_text "the bubble's parts" "^\*   contention +3\.0 +- +-$"
check_ok "compare json" "$bin" history compare 1 2 --db runs.db --json
json_ok "compare json" out.txt "json_array_length(j, '\$.runs') = 2 AND \
  (SELECT group_concat(value) FROM json_each(j, '\$.differ')) = 'schedule,config.pipeline.recompute,config.data,peak_act_bytes,last_loss,min_loss,\
median_tokens_per_s,mean_bubble,bubble_ideal,bubble_imbalance,bubble_transfer,bubble_contention' \
  AND json_extract(j, '\$.runs[0].peak_act_bytes') = 4194304"

# ---- export -------------------------------------------------------------------------------
check_ok "export csv" "$bin" history export 1 --csv --db runs.db
if [ "$(wc -l < out.txt)" -eq 201 ] && [ "$(head -1 out.txt)" = "step,loss,lr,grad_norm,tokens_per_s,step_ms,bubble,gflops,val_loss" ] &&
   [ "$(sed -n 2p out.txt)" = "1,5.49509152,0.003,1,19101,100,0.2,50," ]; then pass; else
  fail "export csv"; head -3 out.txt; fi
cp out.txt stdout.csv
check_ok "export --out" "$bin" history export 1 --csv --db runs.db --out steps.csv
if [ ! -s out.txt ] && cmp -s steps.csv stdout.csv; then pass; else fail "--out writes what stdout shows"; fi
if [ -z "$(ls -A | grep tmp)" ]; then pass; else fail "temporary files left: $(ls -A)"; fi
check_ok "export json" "$bin" history export latest --json --db runs.db
json_ok "empty export" out.txt "json_array_length(j) = 0"
check_ok "export json" "$bin" history export 2 --json --db runs.db
json_ok "export json" out.txt "json_array_length(j) = 200 AND json_extract(j, '\$[199].step') = 200"
rm -f steps.csv stdout.csv

after=$(md5sum runs.db)
if [ "$before" = "$after" ]; then pass; else fail "reads changed runs.db"; fi

# ---- stores that are not to be read ---------------------------------------------------------
: > empty_store.db
sqlite3 empty_store.db < schema.sql
check_ok "empty store" "$bin" history --db empty_store.db
expect_text "friendly line" "^no runs in empty_store.db yet"
printf 'my notes\nnot a database at all, but long enough to have a header\n' > notes.txt
notes_sum=$(md5sum notes.txt)
expect_error "notes.txt: not a SQLite database" --db notes.txt
if [ "$notes_sum" = "$(md5sum notes.txt)" ] && [ ! -e notes.txt-wal ]; then pass; else fail "notes.txt changed"; fi
sqlite3 recipes.db "CREATE TABLE recipes(name TEXT); INSERT INTO recipes VALUES ('soup');"
expect_error "recipes.db: a SQLite database but not a pptrain run store" --db recipes.db
sqlite3 future.db "PRAGMA application_id = 1886418034; CREATE TABLE runs(id); PRAGMA user_version = 7;"
expect_error "future.db: schema version 7 is newer than this pptrain" --db future.db
expect_error "nowhere.db: no such run store" --db nowhere.db
if [ ! -e nowhere.db ]; then pass; else fail "a read created nowhere.db"; fi
expect_error "no runs yet, so no latest run" show latest --db empty_store.db

# ---- bad input --------------------------------------------------------------------------------
expect_error "no run 42" show 42 --db runs.db
expect_error "no run 42" compare 1 42 --db runs.db
expect_error "'abc' is not a run id" show abc --db runs.db
expect_error "'0' is not a run id" export 0 --csv --db runs.db
expect_error "history show: needs a RUN" show --db runs.db
expect_error "history compare: needs at least two runs" compare 1 --db runs.db
expect_error "history show: unexpected argument '2'" show 1 2 --db runs.db
expect_error "history: unknown subcommand 'delete'" delete 1
expect_error "history: unknown option '--frobnicate'" --frobnicate
expect_error "history: unknown option '-x'" show 1 -x
expect_error "--db needs a value" --db
expect_error "history list: --csv does not apply" --csv --db runs.db
expect_error "history compare: --limit does not apply" --db runs.db --limit 3 compare 1 2
expect_error "history show: --out does not apply" show 1 --out x --db runs.db
expect_error "history export: --csv and --json both given" export 1 --csv --json --db runs.db
expect_error "history export: choose --csv or --json" export 1 --db runs.db
expect_error "--since: '2025-13-01' is not a date" --since 2025-13-01 --db runs.db
expect_error "--since: '2025-02-30' is not a date" --since 2025-02-30 --db runs.db
expect_error "--since: 'yesterday' is not a date" --since yesterday --db runs.db
expect_error "--since: '2025-03-01T25:00' is not a date" --since 2025-03-01T25:00 --db runs.db
expect_error "--limit: 0 is out of range" --limit 0 --db runs.db
expect_error "--limit: 'ten' is not an integer" --limit ten --db runs.db
expect_error "--status: 'done' is not running, finished, failed, stopped or crashed" --status done --db runs.db
if [ ! -e pptrain.db ]; then pass; else fail "pptrain.db appeared"; fi

# ---- a real run: list's median tok/s is the train summary's (step 1 left out of 2 or more) ----
"$bin" train --data "$src/tests/fixtures/text" --steps 4 --seq 32 --db real.db >train.txt 2>&1 ||
  fail "train for the median: $(tail -1 train.txt)"
summary=$(sed -n 's/^done: .*| median \([0-9]*\) tok\/s.*/\1/p' train.txt)
check_ok "list of the real run" "$bin" history list --db real.db
listed=$(awk '$1 == 1 {print $(NF - 1)}' out.txt)
if [ -n "$summary" ] && [ "$summary" = "$listed" ]; then pass
else fail "history list median tok/s '$listed' differs from train's summary '$summary'"; cat train.txt out.txt; fi

cli_finish
