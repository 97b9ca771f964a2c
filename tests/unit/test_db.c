// The run store: schema and migrations, refusals that leave foreign files untouched, batched
// step writes, checkpoint manifests, crashed-run detection, and readers that never see
// "database is locked" while rank 0 writes 10,000 steps.
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "storage/db.h"
#include "tests/unit/test_util.h"

static char tmp_dir[] = "/tmp/pptrain_test_db.XXXXXX";

static void path_in_tmp(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", tmp_dir, name);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

// A raw connection for setting up and inspecting files behind the store's back.
static sqlite3 *raw_open(const char *path) {
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) {
        fprintf(stderr, "raw_open %s: %s\n", path, sqlite3_errmsg(db));
        exit(1);
    }
    sqlite3_busy_timeout(db, 5000);
    return db;
}

static void raw_exec(const char *path, const char *sql) {
    sqlite3 *db = raw_open(path);
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fprintf(stderr, "raw_exec %s: %s\n", path, msg);
        exit(1);
    }
    sqlite3_close(db);
}

// The first column of the first row as text ("" when there is none).
static void raw_text(const char *path, const char *sql, char *out, size_t size) {
    sqlite3 *db = raw_open(path);
    sqlite3_stmt *stmt = NULL;
    out[0] = '\0';
    if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW &&
        sqlite3_column_text(stmt, 0))
        snprintf(out, size, "%s", (const char *)sqlite3_column_text(stmt, 0));
    else if (!stmt) snprintf(out, size, "error: %s", sqlite3_errmsg(db));
    sqlite3_finalize(stmt);
    sqlite3_close(db);
}

static long raw_int(const char *path, const char *sql) {
    char text[64];
    raw_text(path, sql, text, sizeof text);
    return strtol(text, NULL, 10);
}

static void check_integrity(const char *path) {
    char text[256];
    raw_text(path, "PRAGMA integrity_check", text, sizeof text);
    CHECK(strcmp(text, "ok") == 0, "%s: integrity_check says '%s'", path, text);
    raw_text(path, "PRAGMA foreign_key_check", text, sizeof text);
    CHECK(text[0] == '\0', "%s: foreign_key_check found '%s'", path, text);
}

static char *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    rewind(f);
    char *buf = malloc(*size + 1);
    size_t got = fread(buf, 1, *size, f);
    fclose(f);
    *size = got;
    buf[got] = '\0';
    return buf;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static DbRun sample_run(void) {
    return (DbRun){.schedule = "1f1b", .stages = 4, .virtual_stages = 1, .dp = 1, .microbatches = 8, .batch = 16,
                   .seq_len = 128, .model = "tiny", .params = 330000, .lr = 3e-3, .seed = 1337,
                   .transport = "local", .device = "cpu", .config_json = "{\"model\":\"tiny\",\"steps\":200}",
                   .steps_planned = 200};
}

static DbStep sample_step(int step) {
    return (DbStep){.step = step, .loss = 5.0 - 0.001 * step, .lr = 1e-3, .grad_norm = 1.5, .tokens_per_s = 1000 + step,
                    .step_ms = 50, .gflops = 10, .bubble = 0.25};
}

static void sample_stages(int step, DbStageStep st[4]) {
    for (int s = 0; s < 4; s++)
        st[s] = (DbStageStep){.stage = s, .rank = s, .busy_ms = 30 + s, .between_ms = 15, .sendrecv_ms = 5 - s,
                              .peak_act_bytes = (int64_t)(step % 7 + 1) << 20};
}

// Refusal: db_open fails mentioning want, and the file's bytes are unchanged.
static void check_refused(const char *path, bool create, const char *want) {
    size_t before_size = 0, after_size = 0;
    char *before = read_all(path, &before_size);
    Error err = {{0}};
    Db *db = db_open(path, create, &err);
    CHECK(db == NULL, "%s (create %d) was opened", path, create);
    db_close(db);
    CHECK(strstr(err.msg, want) != NULL, "error '%s' does not mention '%s'", err.msg, want);
    CHECK(strchr(err.msg, '\n') == NULL, "error is more than one line");
    char *after = read_all(path, &after_size);
    CHECK(before && after && before_size == after_size && memcmp(before, after, before_size) == 0,
          "%s changed (%zu -> %zu bytes)", path, before_size, after_size);
    char side[4200];
    snprintf(side, sizeof side, "%s-wal", path);
    CHECK(!exists(side), "%s appeared", side);
    free(before);
    free(after);
}

static void test_fresh_store(void) {
    char path[256];
    path_in_tmp(path, sizeof path, "fresh.db");
    Error err = {{0}};
    Db *db = db_open(path, true, &err);
    CHECK(db != NULL, "create: %s", err.msg);
    db_close(db);
    CHECK(raw_int(path, "PRAGMA user_version") == DB_SCHEMA_VERSION, "user_version");
    CHECK(raw_int(path, "PRAGMA application_id") == DB_APPLICATION_ID, "application_id");
    char mode[32];
    raw_text(path, "PRAGMA journal_mode", mode, sizeof mode);
    CHECK(strcmp(mode, "wal") == 0, "journal_mode %s", mode);
    const char *tables[] = {"runs", "steps", "stage_steps", "checkpoints", "checkpoint_files"};
    for (int i = 0; i < 5; i++) {
        char sql[256];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '%s'", tables[i]);
        CHECK(raw_int(path, sql) == 1, "table %s missing", tables[i]);
    }
    db = db_open(path, true, &err);  // reopening changes nothing
    CHECK(db != NULL, "reopen: %s", err.msg);
    db_close(db);
    db = db_open(path, false, &err);
    CHECK(db != NULL, "reader: %s", err.msg);
    DbRunInfo *runs;
    int n = -1;
    CHECK(db && db_runs_list(db, &(DbRunFilter){0}, &runs, &n, &err) == 0 && n == 0, "empty list: %d %s", n, err.msg);
    CHECK(db && db_run_latest(db, &err) == 0, "latest of an empty store");
    db_close(db);
    check_integrity(path);
}

static void test_schema_sql(void) {
    char path[256], sqlfile[256];
    path_in_tmp(path, sizeof path, "from_schema.db");
    path_in_tmp(sqlfile, sizeof sqlfile, "schema.sql");
    FILE *f = fopen(sqlfile, "w");
    db_schema_write(f);
    fclose(f);
    size_t size;
    char *sql = read_all(sqlfile, &size);
    raw_exec(path, sql);
    free(sql);
    Error err = {{0}};
    Db *db = db_open(path, false, &err);
    CHECK(db != NULL, "a store made from `history schema` opens: %s", err.msg);
    db_close(db);
    check_integrity(path);
}

static void test_write_read(void) {
    char path[256];
    path_in_tmp(path, sizeof path, "rw.db");
    Error err = {{0}};
    Db *db = db_open(path, true, &err);
    DbRun row = sample_run();
    int64_t run = db_run_begin(db, &row, &err);
    CHECK(run == 1, "run id %lld: %s", (long long)run, err.msg);
    // Batching: 120 quick steps are two commits of 50; the last 20 wait for a flush.
    for (int s = 1; s <= 120; s++) {
        DbStep st = sample_step(s);
        if (s == 7) st.loss = NAN, st.bubble = NAN;
        DbStageStep stages[4];
        sample_stages(s, stages);
        CHECK(db_step_add(db, run, &st, stages, 4, &err) == 0, "step %d: %s", s, err.msg);
    }
    CHECK(raw_int(path, "SELECT count(*) FROM steps") == 100, "committed before flush: %ld",
          raw_int(path, "SELECT count(*) FROM steps"));
    CHECK(db_flush(db, &err) == 0, "flush: %s", err.msg);
    CHECK(raw_int(path, "SELECT count(*) FROM steps") == 120, "after flush");
    CHECK(raw_int(path, "SELECT count(*) FROM stage_steps") == 480, "stage rows");
    CHECK(raw_int(path, "SELECT count(*) FROM steps WHERE loss IS NULL AND bubble IS NULL AND step = 7") == 1,
          "NaN stored as NULL");
    // A slow step commits by time.
    DbStep late = sample_step(121);
    usleep((DB_FLUSH_MS + 50) * 1000);
    CHECK(db_step_add(db, run, &late, NULL, 0, &err) == 0, "late step: %s", err.msg);
    CHECK(raw_int(path, "SELECT count(*) FROM steps") == 121, "a step after %d ms commits at once", DB_FLUSH_MS);
    DbStep dup = sample_step(121);
    CHECK(db_step_add(db, run, &dup, NULL, 0, &err) == 0 && db_flush(db, &err) == -1 &&
          strstr(err.msg, "UNIQUE") && strstr(err.msg, path), "duplicate step refused: %s", err.msg);
    db_close(db);  // reports the still-buffered duplicate on stderr

    db = db_open(path, true, &err);
    CHECK(db_run_end(db, run, "done", NULL, &err) == -1 && strstr(err.msg, "not finished, failed or stopped"),
          "bad status: %s", err.msg);
    CHECK(db_run_end(db, run, "finished", NULL, &err) == 0, "end: %s", err.msg);
    CHECK(db_run_end(db, run, "finished", NULL, &err) == -1 && strstr(err.msg, "no such running run"),
          "ending twice: %s", err.msg);
    DbRun bad = sample_run();
    bad.config_json = "{not json";
    CHECK(db_run_begin(db, &bad, &err) == -1 && strstr(err.msg, "not a JSON object"), "bad config: %s", err.msg);
    bad = sample_run();
    bad.resumed_from = 99;
    CHECK(db_run_begin(db, &bad, &err) == -1 && strstr(err.msg, "FOREIGN KEY"), "resumed_from 99: %s", err.msg);
    bad.resumed_from = run;
    int64_t run2 = db_run_begin(db, &bad, &err);
    CHECK(run2 == 2, "resumed run: %s", err.msg);
    db_close(db);

    db = db_open(path, false, &err);
    DbRunInfo r;
    CHECK(db_run_get(db, run, &r, &err) == 0, "get: %s", err.msg);
    CHECK(strcmp(r.status, "finished") == 0 && r.ended_at && !r.crashed, "status %s", r.status);
    CHECK(r.steps_done == 121 && r.last_step == 121 && r.steps_planned == 200, "steps %d", r.steps_done);
    CHECK_NEAR(r.last_loss, 5.0 - 0.121, 1e-12, "last loss");
    CHECK_NEAR(r.min_loss, 5.0 - 0.121, 1e-12, "min loss");
    CHECK_NEAR(r.median_tokens_per_s, 1061.5, 1e-9, "median of 1002..1121 (step 1 left out, as train's summary)");
    CHECK_NEAR(r.mean_bubble, 0.25, 1e-12, "mean bubble");
    CHECK(strcmp(r.schedule, "1f1b") == 0 && r.stages == 4 && r.microbatches == 8 && r.seed == 1337 &&
          strcmp(r.config_json, row.config_json) == 0 && r.pid == getpid(), "columns round-trip");
    db_run_info_clear(&r);
    CHECK(db_run_get(db, 42, &r, &err) == -1 && strstr(err.msg, "no run 42"), "missing run: %s", err.msg);
    CHECK(db_run_latest(db, &err) == 2, "latest");
    DbStep *steps;
    int n;
    CHECK(db_steps_read(db, run, 10, &steps, &n, &err) == 0 && n == 10 && steps[0].step == 112 &&
          steps[9].step == 121 && isnan(steps[0].bubble) == false, "last 10 steps");
    free(steps);
    CHECK(db_steps_read(db, run, 0, &steps, &n, &err) == 0 && n == 121 && isnan(steps[6].loss), "all steps");
    free(steps);
    DbStageSummary *st;
    CHECK(db_stage_summary(db, run, &st, &n, &err) == 0 && n == 4, "stage summary: %s", err.msg);
    if (n == 4) {
        CHECK_NEAR(st[2].busy_ms, 32, 1e-9, "stage 2 busy");
        CHECK_NEAR(st[2].busy_frac, 32.0 / 50.0, 1e-12, "stage 2 busy fraction");
        CHECK(st[0].peak_act_bytes == 7 << 20 && st[0].steps == 120 && st[0].ranks == 1, "stage 0 peak");
    }
    free(st);
    DbRunInfo *runs;
    CHECK(db_runs_list(db, &(DbRunFilter){.status = "running"}, &runs, &n, &err) == 0 && n == 1 && runs[0].id == 2,
          "filter by status");
    db_runs_free(runs, n);
    CHECK(db_runs_list(db, &(DbRunFilter){.limit = 1}, &runs, &n, &err) == 0 && n == 1 && runs[0].id == 2,
          "newest first, limited");
    db_runs_free(runs, n);
    CHECK(db_runs_list(db, &(DbRunFilter){.since = "2999-01-01T00:00:00.000Z"}, &runs, &n, &err) == 0 && n == 0,
          "since the future");
    db_runs_free(runs, n);
    db_close(db);
    check_integrity(path);
}

static void test_checkpoints(void) {
    char path[256];
    path_in_tmp(path, sizeof path, "ckpt.db");
    Error err = {{0}};
    Db *db = db_open(path, true, &err);
    DbRun row = sample_run();
    int64_t run = db_run_begin(db, &row, &err);
    for (int s = 1; s <= 10; s++) {
        DbStep st = sample_step(s);
        db_step_add(db, run, &st, NULL, 0, &err);
    }
    const char *sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    int64_t ck = db_checkpoint_begin(db, run, 10, "ckpt/step-10", &err);
    CHECK(ck == 1, "begin: %s", err.msg);
    CHECK(raw_int(path, "SELECT count(*) FROM steps") == 10, "steps flushed before a checkpoint");
    CHECK(db_checkpoint_file_add(db, ck, "model-00001-of-00002.safetensors", 1000, sha, 0, &err) == 0, "file 1");
    CHECK(db_checkpoint_file_add(db, ck, "model-00002-of-00002.safetensors", 2000, sha, 1, &err) == 0, "file 2");
    CHECK(db_checkpoint_file_add(db, ck, "config.json", 24, sha, -1, &err) == 0, "file 3");
    CHECK(db_checkpoint_file_add(db, ck, "x", 1, "ABC", 0, &err) == -1 && strstr(err.msg, "64 lowercase hex"),
          "bad sha256: %s", err.msg);
    CHECK(db_checkpoint_file_add(db, ck, "config.json", 24, sha, -1, &err) == -1, "same path twice");
    CHECK(raw_int(path, "SELECT count(*) FROM checkpoints WHERE status = 'writing'") == 1, "writing until complete");
    CHECK(db_checkpoint_complete(db, ck, &err) == 0, "complete: %s", err.msg);
    CHECK(db_checkpoint_complete(db, ck, &err) == -1 && strstr(err.msg, "not being written"), "twice: %s", err.msg);
    int64_t ck2 = db_checkpoint_begin(db, run, 20, "ckpt/step-20", &err);
    CHECK(db_checkpoint_fail(db, ck2, "disk full", &err) == 0, "fail: %s", err.msg);
    CHECK(db_checkpoint_begin(db, 77, 1, "nowhere", &err) == -1, "checkpoint of a missing run");
    db_close(db);
    db = db_open(path, false, &err);
    DbCheckpointInfo *cks;
    int n;
    CHECK(db_checkpoints_read(db, run, &cks, &n, &err) == 0 && n == 2, "read: %s", err.msg);
    if (n == 2) {
        CHECK(strcmp(cks[0].status, "complete") == 0 && cks[0].bytes == 3024 && cks[0].files == 3, "complete row");
        CHECK(strcmp(cks[1].status, "failed") == 0 && strcmp(cks[1].error, "disk full") == 0, "failed row");
    }
    db_checkpoints_free(cks, n);
    db_close(db);
    CHECK(raw_int(path, "SELECT count(*) FROM checkpoint_files WHERE stage IS NULL") == 1, "stage -1 is NULL");
    check_integrity(path);
}

static void test_refusals(void) {
    char path[256];
    path_in_tmp(path, sizeof path, "notes.txt");
    FILE *f = fopen(path, "w");
    fprintf(f, "these are my notes, not a database\n");
    for (int i = 0; i < 200; i++) fprintf(f, "line %d\n", i);
    fclose(f);
    check_refused(path, true, "not a SQLite database");
    check_refused(path, false, "not a SQLite database");

    path_in_tmp(path, sizeof path, "newer.db");
    raw_exec(path, "PRAGMA application_id = 1886418034; CREATE TABLE runs(id); PRAGMA user_version = 7;");
    char want[512];
    snprintf(want, sizeof want, "%s: schema version 7 is newer than this pptrain (%d); upgrade pptrain", path,
             DB_SCHEMA_VERSION);
    check_refused(path, true, want);
    check_refused(path, false, want);

    path_in_tmp(path, sizeof path, "foreign.db");
    raw_exec(path, "CREATE TABLE recipes(name TEXT, minutes INTEGER); INSERT INTO recipes VALUES ('soup', 30);");
    check_refused(path, true, "not a pptrain run store");
    check_refused(path, false, "not a pptrain run store");
    check_integrity(path);

    path_in_tmp(path, sizeof path, "other_app.db");
    raw_exec(path, "CREATE TABLE t(x); PRAGMA user_version = 1;");
    check_refused(path, true, "not a pptrain run store (application_id 0");

    path_in_tmp(path, sizeof path, "missing.db");
    Error err = {{0}};
    CHECK(db_open(path, false, &err) == NULL && strstr(err.msg, "no such run store"), "missing: %s", err.msg);
    CHECK(!exists(path), "a reader created %s", path);

    path_in_tmp(path, sizeof path, "empty.db");
    fclose(fopen(path, "w"));
    check_refused(path, false, "an empty SQLite database");
    Db *db = db_open(path, true, &err);
    CHECK(db != NULL, "the writer initializes an empty file: %s", err.msg);
    db_close(db);
    check_integrity(path);

    CHECK(db_open(tmp_dir, true, &err) == NULL && strstr(err.msg, "not a regular file"), "a folder: %s", err.msg);
}

// Version 1 as it shipped, written by hand, with a run in it.
static const char V1_STORE[] =
    "PRAGMA application_id = 1886418034;"
    "CREATE TABLE runs (id INTEGER PRIMARY KEY, started_at TEXT NOT NULL, ended_at TEXT,"
    "  status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'failed', 'stopped')), error TEXT,"
    "  schedule TEXT, stages INTEGER, virtual INTEGER, dp INTEGER, microbatches INTEGER, batch INTEGER,"
    "  seq_len INTEGER, model TEXT, params INTEGER, lr REAL, seed INTEGER, transport TEXT, device TEXT,"
    "  resumed_from INTEGER REFERENCES runs(id) ON DELETE SET NULL, config_json TEXT, steps_planned INTEGER);"
    "CREATE INDEX runs_started ON runs(started_at);"
    "CREATE TABLE steps (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL,"
    "  loss REAL, lr REAL, grad_norm REAL, tokens_per_s REAL, step_ms REAL, bubble REAL,"
    "  PRIMARY KEY (run_id, step)) WITHOUT ROWID;"
    "CREATE TABLE stage_steps (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    "  step INTEGER NOT NULL, stage INTEGER NOT NULL, rank INTEGER NOT NULL, busy_ms REAL, idle_ms REAL,"
    "  comm_ms REAL, peak_act_bytes INTEGER, PRIMARY KEY (run_id, step, stage, rank)) WITHOUT ROWID;"
    "CREATE TABLE checkpoints (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    "  step INTEGER NOT NULL, dir TEXT NOT NULL, created_at TEXT NOT NULL, bytes INTEGER NOT NULL DEFAULT 0,"
    "  status TEXT NOT NULL CHECK (status IN ('writing', 'complete', 'failed')));"
    "CREATE INDEX checkpoints_run ON checkpoints(run_id, step);"
    "CREATE TABLE checkpoint_files (checkpoint_id INTEGER NOT NULL REFERENCES checkpoints(id) ON DELETE CASCADE,"
    "  path TEXT NOT NULL, bytes INTEGER NOT NULL, sha256 TEXT NOT NULL, stage INTEGER,"
    "  PRIMARY KEY (checkpoint_id, path)) WITHOUT ROWID;"
    "PRAGMA user_version = 1;"
    "INSERT INTO runs (started_at, ended_at, status, schedule, stages, virtual, dp, microbatches, batch, seq_len,"
    "  model, lr, seed, steps_planned) VALUES ('2024-05-01T10:00:00.000Z', '2024-05-01T10:01:00.000Z',"
    "  'finished', 'gpipe', 2, 1, 1, 4, 8, 64, 'tiny', 0.001, 7, 3);"
    "INSERT INTO steps VALUES (1, 1, 5.5, 0.001, 2, 900, 20, 0.3), (1, 2, 5.0, 0.001, 2, 1000, 20, 0.3),"
    "  (1, 3, 4.5, 0.001, 2, 1100, 20, 0.3);"
    "INSERT INTO stage_steps VALUES (1, 1, 0, 0, 30, 15, 5, 1048576), (1, 1, 1, 1, 28, 12, 10, 2097152);";

static void check_migrated(const char *path, bool create) {
    Error err = {{0}};
    Db *db = db_open(path, create, &err);
    CHECK(db != NULL, "open v1 (create %d): %s", create, err.msg);
    DbRunInfo r = {0};
    CHECK(db && db_run_get(db, 1, &r, &err) == 0 && r.steps_done == 3 && strcmp(r.schedule, "gpipe") == 0 &&
          r.host == NULL, "v1 rows survive: %s", err.msg);
    CHECK_NEAR(r.median_tokens_per_s, 1050, 1e-9, "median after migration (of steps 2 and 3)");
    db_run_info_clear(&r);
    db_close(db);
    CHECK(raw_int(path, "PRAGMA user_version") == DB_SCHEMA_VERSION, "migrated to the current version");
    char text[64];
    raw_text(path, "SELECT count(host) + count(pid) + count(heartbeat_at) FROM runs", text, sizeof text);
    CHECK(strcmp(text, "0") == 0, "v2 run columns exist: %s", text);
    raw_text(path, "SELECT count(gflops) FROM steps", text, sizeof text);
    CHECK(strcmp(text, "0") == 0, "v2 gflops exists: %s", text);
    raw_text(path, "SELECT count(error) + count(completed_at) FROM checkpoints", text, sizeof text);
    CHECK(strcmp(text, "0") == 0, "v2 checkpoint columns exist: %s", text);
    CHECK(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'runs_status'") == 1, "v2 index");
    CHECK(raw_int(path, "SELECT count(*) FROM evals") == 0, "v4 evals table exists, empty");
    // v6: idle_ms and comm_ms hold the same numbers as between_ms and sendrecv_ms (issue 29).
    raw_text(path, "SELECT group_concat(between_ms || '/' || sendrecv_ms, ' ') FROM stage_steps", text, sizeof text);
    CHECK(strcmp(text, "15.0/5.0 12.0/10.0") == 0, "v6 renamed stage columns keep their values: %s", text);
    db = db_open(path, false, &err);
    DbStageSummary *st = NULL;
    int n = 0;
    CHECK(db && db_stage_summary(db, 1, &st, &n, &err) == 0 && n == 2, "stage summary after migration: %s", err.msg);
    if (n == 2)
        CHECK(st[0].busy_ms == 30 && st[0].between_ms == 15 && st[0].sendrecv_ms == 5 && st[1].sendrecv_ms == 10 &&
                  st[0].busy_frac == 0.6,
              "a v1 store's stage times under the v6 names: busy %g between %g sendrecv %g", st[0].busy_ms,
              st[0].between_ms, st[0].sendrecv_ms);
    free(st);
    db_close(db);
    check_integrity(path);
}

static void test_migration(void) {
    char path[256];
    path_in_tmp(path, sizeof path, "v1_writer.db");
    raw_exec(path, V1_STORE);
    check_migrated(path, true);
    path_in_tmp(path, sizeof path, "v1_reader.db");
    raw_exec(path, V1_STORE);
    check_migrated(path, false);
    // A migrated store migrates no further.
    check_migrated(path, false);
}

// Validation passes: committed at once with the buffered steps, read back in step order, summed
// into the run's info (count, last, least); a run without passes reads NaN; a second pass at
// one step is refused; a deleted run takes its passes along.
static void test_evals(void) {
    char path[256];
    path_in_tmp(path, sizeof path, "evals.db");
    Error err = {{0}};
    Db *db = db_open(path, true, &err);
    DbRun row = sample_run();
    const int64_t run = db_run_begin(db, &row, &err), bare = db_run_begin(db, &row, &err);
    CHECK(run == 1 && bare == 2, "runs: %s", err.msg);
    const double losses[] = {4.5, 4.25, NAN, 4.375};
    for (int s = 1; s <= 8; s++) {
        DbStep st = sample_step(s);
        CHECK(db_step_add(db, run, &st, NULL, 0, &err) == 0, "step %d: %s", s, err.msg);
        if (s % 2) continue;
        const DbEval ev = {.step = s, .val_loss = losses[s / 2 - 1], .batches = 3};
        CHECK(db_eval_add(db, run, &ev, &err) == 0, "eval at %d: %s", s, err.msg);
        CHECK(raw_int(path, "SELECT count(*) FROM evals") == s / 2, "eval %d committed at once", s / 2);
        CHECK(raw_int(path, "SELECT count(*) FROM steps") == s, "with the steps before it (%d)", s);
    }
    DbEval *ev = NULL;
    int n = 0;
    CHECK(db_evals_read(db, run, &ev, &n, &err) == 0 && n == 4, "read: %d, %s", n, err.msg);
    for (int i = 0; i < n; i++)
        CHECK(ev[i].step == 2 * (i + 1) && ev[i].batches == 3 &&
                  (isnan(losses[i]) ? isnan(ev[i].val_loss) : ev[i].val_loss == losses[i]),
              "eval %d: step %d loss %g batches %d", i, ev[i].step, ev[i].val_loss, ev[i].batches);
    free(ev);
    DbRunInfo r = {0};
    CHECK(db_run_get(db, run, &r, &err) == 0 && r.evals == 4 && r.last_val_step == 8 && r.last_val_loss == 4.375 &&
              r.min_val_loss == 4.25,
          "run info: %d evals, last %g at %d, min %g", r.evals, r.last_val_loss, r.last_val_step, r.min_val_loss);
    db_run_info_clear(&r);
    CHECK(db_run_get(db, bare, &r, &err) == 0 && r.evals == 0 && isnan(r.last_val_loss) && isnan(r.min_val_loss),
          "a run without passes: %d evals, last %g", r.evals, r.last_val_loss);
    db_run_info_clear(&r);
    const DbEval again = {.step = 8, .val_loss = 1.0, .batches = 1};
    CHECK(db_eval_add(db, run, &again, &err) == -1 && strstr(err.msg, "UNIQUE"), "a second pass at step 8: %s",
          err.msg);
    CHECK(db_discard_pending(db) == 1, "the refused pass is dropped");
    db_close(db);
    raw_exec(path, "PRAGMA foreign_keys = ON; DELETE FROM runs WHERE id = 1;");
    CHECK(raw_int(path, "SELECT count(*) FROM evals") == 0, "deleting the run deletes its passes");
}

// A child records a run and dies without ending it: the run stays 'running' on disk, readers
// see it as crashed, the writer marks it failed; a live process's run is left alone.
static void test_crashed_run(void) {
    char path[256];
    path_in_tmp(path, sizeof path, "crash.db");
    Error err = {{0}};
    db_close(db_open(path, true, &err));
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        Db *db = db_open(path, true, &err);
        DbRun row = sample_run();
        int64_t run = db_run_begin(db, &row, &err);
        DbStep st = sample_step(1);
        db_step_add(db, run, &st, NULL, 0, &err);
        db_flush(db, &err);
        raise(SIGKILL);
    }
    int status;
    waitpid(child, &status, 0);
    CHECK(WIFSIGNALED(status), "the child was killed");
    Db *db = db_open(path, true, &err);
    DbRun row = sample_run();
    int64_t live = db_run_begin(db, &row, &err);
    Db *reader = db_open(path, false, &err);
    DbRunInfo r;
    CHECK(db_run_get(reader, 1, &r, &err) == 0 && strcmp(r.status, "running") == 0 && r.crashed, "reader sees crashed");
    db_run_info_clear(&r);
    CHECK(db_run_get(reader, live, &r, &err) == 0 && !r.crashed, "a live run is not crashed");
    db_run_info_clear(&r);
    DbRunInfo *runs;
    int n;
    CHECK(db_runs_list(reader, &(DbRunFilter){.status = "crashed"}, &runs, &n, &err) == 0 && n == 1 &&
          runs[0].id == 1, "filter crashed");
    db_runs_free(runs, n);
    int marked = -1;
    CHECK(db_mark_stale_runs(db, &marked, &err) == 0 && marked == 1, "marked %d: %s", marked, err.msg);
    CHECK(db_run_get(reader, 1, &r, &err) == 0 && strcmp(r.status, "failed") == 0 && !r.crashed && r.ended_at &&
          r.error && strstr(r.error, "ended without finishing the run"), "marked failed");
    db_run_info_clear(&r);
    CHECK(db_run_get(reader, live, &r, &err) == 0 && strcmp(r.status, "running") == 0, "live run untouched");
    db_run_info_clear(&r);
    CHECK(db_mark_stale_runs(db, &marked, &err) == 0 && marked == 0, "nothing left to mark");
    db_run_end(db, live, "stopped", NULL, &err);
    db_close(reader);
    db_close(db);
    check_integrity(path);
}

// ---- readers never see "database is locked" ---------------------------------------------------

#define CONC_STEPS 10000
#define CONC_PACE_US 200

typedef struct {
    long iterations, errors, partial_views, final_steps;
    char first_error[512];
} ReaderReport;

static void reader_note(ReaderReport *rep, int rc, const Error *err) {
    if (rc == 0) return;
    if (rep->errors++ == 0) snprintf(rep->first_error, sizeof rep->first_error, "%s", err->msg);
}

// Polls like `pptrain watch` would, reconnecting now and then like separate `pptrain history`
// processes, until the run ends; reports through report_fd.
static void reader_child(const char *path, int64_t run, int ready_fd, int report_fd) {
    ReaderReport rep = {0};
    Error err = {{0}};
    Db *db = db_open(path, false, &err);
    reader_note(&rep, db ? 0 : -1, &err);
    if (write(ready_fd, "r", 1) != 1) _exit(3);
    double deadline = now_s() + 60;
    bool running = db != NULL;
    while (running && now_s() < deadline) {
        DbRunInfo *runs = NULL, r;
        DbStep *steps = NULL;
        DbStageSummary *st = NULL;
        int n = 0, n_steps = 0, n_st = 0;
        reader_note(&rep, db_runs_list(db, &(DbRunFilter){0}, &runs, &n, &err), &err);
        db_runs_free(runs, n);
        int rc = db_run_get(db, run, &r, &err);
        reader_note(&rep, rc, &err);
        if (rc == 0) {
            running = strcmp(r.status, "running") == 0;
            rep.partial_views += r.steps_done > 0 && r.steps_done < CONC_STEPS;
            rep.final_steps = r.steps_done;
            db_run_info_clear(&r);
        }
        reader_note(&rep, db_steps_read(db, run, 20, &steps, &n_steps, &err), &err);
        free(steps);
        reader_note(&rep, db_stage_summary(db, run, &st, &n_st, &err), &err);
        free(st);
        if (++rep.iterations % 8 == 0) {  // as a new `pptrain history` process would
            db_close(db);
            db = db_open(path, false, &err);
            reader_note(&rep, db ? 0 : -1, &err);
            running = db != NULL;
        }
    }
    db_close(db);
    if (write(report_fd, &rep, sizeof rep) != (ssize_t)sizeof rep) _exit(3);
    _exit(0);
}

static void test_concurrent_reader(void) {
    char path[256];
    path_in_tmp(path, sizeof path, "concurrent.db");
    Error err = {{0}};
    Db *db = db_open(path, true, &err);
    DbRun row = sample_run();
    row.steps_planned = CONC_STEPS;
    int64_t run = db_run_begin(db, &row, &err);
    db_close(db);  // no connection crosses the fork
    int ready[2], report[2];
    CHECK(pipe(ready) == 0 && pipe(report) == 0, "pipes");
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) reader_child(path, run, ready[1], report[1]);
    char c;
    CHECK(read(ready[0], &c, 1) == 1, "the reader started");
    double t0 = now_s();
    db = db_open(path, true, &err);
    int failures = 0;
    for (int s = 1; s <= CONC_STEPS; s++) {
        DbStep st = sample_step(s);
        DbStageStep stages[4];
        sample_stages(s, stages);
        if (db_step_add(db, run, &st, stages, 4, &err) && failures++ == 0) fprintf(stderr, "writer: %s\n", err.msg);
        if (s > CONC_STEPS / 2) usleep(CONC_PACE_US);  // the second half paced, so that reads interleave
    }
    CHECK(failures == 0, "%d writes failed", failures);
    CHECK(db_run_end(db, run, "finished", NULL, &err) == 0, "end: %s", err.msg);
    db_close(db);
    double write_s = now_s() - t0;
    ReaderReport rep = {0};
    CHECK(read(report[0], &rep, sizeof rep) == (ssize_t)sizeof rep, "the reader reported");
    int status;
    waitpid(child, &status, 0);
    double total_s = now_s() - t0;
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "reader exit status %d", status);
    CHECK(rep.errors == 0, "the reader saw %ld errors, the first: %s", rep.errors, rep.first_error);
    CHECK(rep.final_steps == CONC_STEPS, "the reader's last count %ld", rep.final_steps);
    CHECK(rep.partial_views > 0, "the reader never saw the run mid-write (%ld polls)", rep.iterations);
    CHECK(raw_int(path, "SELECT count(*) FROM steps") == CONC_STEPS, "steps on disk");
    CHECK(raw_int(path, "SELECT count(*) FROM stage_steps") == 4 * CONC_STEPS, "stage steps on disk");
    check_integrity(path);
    printf("concurrent: %d steps x 4 stages written in %.2f s while a reader polled %ld times "
           "(%ld mid-run), %ld errors; %.2f s in all\n",
           CONC_STEPS, write_s, rep.iterations, rep.partial_views, rep.errors, total_s);
    for (int i = 0; i < 2; i++) close(ready[i]), close(report[i]);
}

// Steps written in 60 adds: DB_FLUSH_STEPS (50) of them reach a commit.
static int add_steps(Db *db, int64_t run, int first, int n, Error *err) {
    int failures = 0;
    for (int s = first; s < first + n; s++) {
        DbStep st = sample_step(s);
        DbStageStep stages[4];
        sample_stages(s, stages);
        failures += db_step_add(db, run, &st, stages, 4, err) != 0;
    }
    return failures;
}

// Another connection holds the write lock past the busy wait: the steps stay buffered, the
// failure says busy, and they are all committed once the lock is gone.
static void test_busy_store(void) {
    char path[256];
    path_in_tmp(path, sizeof path, "busy.db");
    setenv("PPTRAIN_TEST_DB_BUSY_MS", "50", 1);
    Error err = {{0}};
    Db *db = db_open(path, true, &err);
    CHECK(db && db_busy_timeout_ms(db) == 50, "the test hook shortens the busy wait");
    const int64_t run = db_run_begin(db, &(DbRun){.schedule = "1f1b", .stages = 1, .model = "tiny"}, &err);
    sqlite3 *holder = raw_open(path);
    CHECK(sqlite3_exec(holder, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK, "the holder takes the lock");
    const int failures = add_steps(db, run, 1, 60, &err);
    CHECK(failures == 1, "one commit tried under the lock, then a pause (%d failed)", failures);
    CHECK(db_busy(db) && db_backlogged(db), "the failure is a busy one: %s", err.msg);
    CHECK(raw_int(path, "SELECT count(*) FROM steps") == 0, "nothing committed while locked");
    sqlite3_exec(holder, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(holder);
    CHECK(db_flush(db, &err) == 0 && !db_backlogged(db), "caught up: %s", err.msg);
    CHECK(db_run_end(db, run, "finished", NULL, &err) == 0, "end: %s", err.msg);
    db_close(db);
    CHECK(raw_int(path, "SELECT count(*) FROM steps") == 60, "every step recorded");
    CHECK(raw_int(path, "SELECT count(*) FROM stage_steps") == 240, "every stage row recorded");
    check_integrity(path);
    unsetenv("PPTRAIN_TEST_DB_BUSY_MS");
}

// A store that cannot grow (as on a full disk): the failure is not busy; the unwritten steps
// can be dropped and the run still ends 'failed'.
static void test_full_store(void) {
    char path[256];
    path_in_tmp(path, sizeof path, "full.db");
    Error err = {{0}};
    Db *db = db_open(path, true, &err);
    db_close(db);
    setenv("PPTRAIN_TEST_DB_MAX_PAGES", "1", 1);   // clamped to the store's present size
    db = db_open(path, true, &err);
    CHECK(db != NULL, "opens: %s", err.msg);
    const int64_t run = db_run_begin(db, &(DbRun){.schedule = "1f1b", .stages = 1, .model = "tiny"}, &err);
    CHECK(run > 0, "the run row fits: %s", err.msg);
    const int failures = add_steps(db, run, 1, 60, &err);
    CHECK(failures > 0 && !db_busy(db), "a full store fails, and not as busy: %s", err.msg);
    CHECK(strstr(err.msg, "full") != NULL, "the line says full: %s", err.msg);
    CHECK(db_discard_pending(db) > 0, "the unwritten steps are dropped");
    CHECK(db_run_end(db, run, "failed", "the store is full", &err) == 0, "the run still ends failed: %s", err.msg);
    db_close(db);
    unsetenv("PPTRAIN_TEST_DB_MAX_PAGES");
    CHECK(raw_int(path, "SELECT count(*) FROM runs WHERE status = 'failed'") == 1, "the row says failed");
    check_integrity(path);
}

// 4 KiB of 0xff over the third page: refused by writers and readers alike, file untouched.
static void test_damaged_store(void) {
    char path[256];
    path_in_tmp(path, sizeof path, "damaged.db");
    Error err = {{0}};
    Db *db = db_open(path, true, &err);
    const int64_t run = db_run_begin(db, &(DbRun){.schedule = "1f1b", .stages = 1, .model = "tiny"}, &err);
    add_steps(db, run, 1, 60, &err);
    db_run_end(db, run, "finished", NULL, &err);
    db_close(db);
    CHECK(raw_int(path, "PRAGMA page_count") >= 4, "a third page to damage");
    char page[4096];
    memset(page, 0xff, sizeof page);
    FILE *f = fopen(path, "r+b");
    CHECK(f && fseek(f, 2 * 4096, SEEK_SET) == 0 && fwrite(page, 1, sizeof page, f) == sizeof page, "damaged");
    if (f) fclose(f);
    size_t before_size = 0, after_size = 0;
    char *before = read_all(path, &before_size);
    for (int create = 0; create < 2; create++) {
        Error why = {{0}};
        Db *d = db_open(path, create, &why);
        CHECK(d == NULL, "a damaged store is refused (create %d)", create);
        if (d) db_close(d);
        CHECK(strstr(why.msg, "the run store is damaged") && !strchr(why.msg, '\n'), "one line: %s", why.msg);
    }
    char *after = read_all(path, &after_size);
    CHECK(before && after && before_size == after_size && memcmp(before, after, before_size) == 0, "left unchanged");
    free(before);
    free(after);
}

static void remove_tmp_dir(void) {
    DIR *d = opendir(tmp_dir);
    if (!d) return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            snprintf(path, sizeof path, "%s/%s", tmp_dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(tmp_dir);
}

int main(void) {
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_fresh_store();
    test_schema_sql();
    test_write_read();
    test_checkpoints();
    test_refusals();
    test_migration();
    test_evals();
    test_crashed_run();
    test_concurrent_reader();
    test_busy_store();
    test_full_store();
    test_damaged_store();
    remove_tmp_dir();
    return test_finish();
}
