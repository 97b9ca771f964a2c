// storage/db_query: the reads behind `pptrain history` and `pptrain watch`. Each public call
// reads one consistent snapshot (a read transaction), so a run being written never shows a
// step without its stage rows.
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage/db.h"
#include "storage/process_gone.h"

#define xrealloc(p, bytes) check_alloc(realloc((p), (bytes)), (bytes), __FILE__, __LINE__)

static char *col_text(sqlite3_stmt *stmt, int i) {
    const char *s = (const char *)sqlite3_column_text(stmt, i);
    if (!s) return NULL;
    char *copy = strdup(s);
    return check_alloc(copy, strlen(s) + 1, __FILE__, __LINE__);
}

static double col_real(sqlite3_stmt *stmt, int i) {
    return sqlite3_column_type(stmt, i) == SQLITE_NULL ? NAN : sqlite3_column_double(stmt, i);
}

// sqlite3_step, unless binding failed: bound is the OR of the sqlite3_bind_* results.
static int step_if(sqlite3_stmt *stmt, int bound) {
    return bound == SQLITE_OK ? sqlite3_step(stmt) : bound;
}

// A 'running' run whose writer lived on this host and is gone. Runs from other hosts cannot
// be checked and count as live.
static bool db_process_gone(const char *host, int64_t pid) {
    char here[256] = "";
    gethostname(here, sizeof here - 1);
    if (!host || strcmp(host, here) != 0 || pid <= 0) return false;
    return process_gone((long)pid);   // a zombie too: a killed mpirun's rank 0 can stay one
}

// ---- runs -------------------------------------------------------------------------------------

#define RUN_COLUMNS \
    "id, started_at, ended_at, status, error, schedule, stages, virtual, dp, microbatches, batch, seq_len, " \
    "model, params, lr, seed, transport, device, resumed_from, config_json, steps_planned, host, pid, " \
    "coalesce(host_cores, 0), coalesce(host_ranks, 0)"

static void run_from_row(sqlite3_stmt *stmt, DbRunInfo *r) {
    *r = (DbRunInfo){.id = sqlite3_column_int64(stmt, 0)};
    r->started_at = col_text(stmt, 1);
    r->ended_at = col_text(stmt, 2);
    r->status = col_text(stmt, 3);
    r->error = col_text(stmt, 4);
    r->schedule = col_text(stmt, 5);
    int *ints[] = {&r->stages, &r->virtual_stages, &r->dp, &r->microbatches, &r->batch, &r->seq_len};
    for (int i = 0; i < 6; i++) *ints[i] = sqlite3_column_int(stmt, 6 + i);
    r->model = col_text(stmt, 12);
    r->params = sqlite3_column_int64(stmt, 13);
    r->lr = col_real(stmt, 14);
    r->seed = (uint64_t)sqlite3_column_int64(stmt, 15);
    r->transport = col_text(stmt, 16);
    r->device = col_text(stmt, 17);
    r->resumed_from = sqlite3_column_int64(stmt, 18);
    r->config_json = col_text(stmt, 19);
    r->steps_planned = sqlite3_column_int(stmt, 20);
    r->host = col_text(stmt, 21);
    r->pid = sqlite3_column_int64(stmt, 22);
    r->host_cores = sqlite3_column_int(stmt, 23);
    r->host_ranks = sqlite3_column_int(stmt, 24);
    r->crashed = r->status && strcmp(r->status, "running") == 0 && db_process_gone(r->host, r->pid);
    r->last_loss = r->min_loss = r->median_tokens_per_s = r->mean_bubble = NAN;
    r->mean_ideal = r->mean_imbalance = r->mean_transfer = r->mean_contention = NAN;
    r->last_val_loss = r->min_val_loss = NAN;
}

void db_run_info_clear(DbRunInfo *r) {
    char *strings[] = {r->started_at, r->ended_at, r->status, r->error, r->schedule, r->model,
                       r->transport, r->device, r->config_json, r->host};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) free(strings[i]);
    *r = (DbRunInfo){0};
}

void db_runs_free(DbRunInfo *runs, int n) {
    for (int i = 0; i < n; i++) db_run_info_clear(&runs[i]);
    free(runs);
}

// Binds args to sql's parameters and steps once: 1 with a row to read (then reset the
// statement), 0 without one, -1 on error.
static int query_row(Db *db, const char *sql, const int64_t *args, int n_args, sqlite3_stmt **out, Error *err) {
    sqlite3_stmt *stmt = *out = db_stmt(db, sql, err);
    if (!stmt) return -1;
    int bound = SQLITE_OK;
    for (int i = 0; i < n_args; i++) bound |= sqlite3_bind_int64(stmt, i + 1, args[i]);
    int rc = step_if(stmt, bound);
    if (rc == SQLITE_ROW) return 1;
    if (rc != SQLITE_DONE) db_fail(db, err, "reading a run's steps");
    sqlite3_reset(stmt);
    return rc == SQLITE_DONE ? 0 : -1;
}

// The middle tokens/s of n_rates, or the mean of the middle two. As train's summary counts
// (engine/train_loop.c summarize): the first rated step pays for page faults and cold caches, so
// it is left out when there are more.
static int run_median_rate(Db *db, DbRunInfo *r, int64_t n_rates, int64_t first_rated, Error *err) {
    static const char SQL[] =
        "SELECT avg(t) FROM (SELECT tokens_per_s AS t FROM steps WHERE run_id = ?1 AND tokens_per_s IS NOT NULL "
        "AND step > ?4 ORDER BY t LIMIT ?2 OFFSET ?3)";
    sqlite3_stmt *stmt;
    const int64_t skip = n_rates > 1, n = n_rates - skip;
    int64_t args[] = {r->id, 2 - n % 2, (n - 1) / 2, skip ? first_rated : first_rated - 1};
    int got = query_row(db, SQL, args, 4, &stmt, err);
    if (got == 1) {
        r->median_tokens_per_s = col_real(stmt, 0);
        sqlite3_reset(stmt);
    }
    return got < 0 ? -1 : 0;
}

// Validation passes, the last one's step and loss, the least loss.
static int run_add_val_stats(Db *db, DbRunInfo *r, Error *err) {
    static const char SQL[] =
        "SELECT count(*), min(val_loss), (SELECT step FROM evals WHERE run_id = ?1 ORDER BY step DESC LIMIT 1), "
        "(SELECT val_loss FROM evals WHERE run_id = ?1 ORDER BY step DESC LIMIT 1) FROM evals WHERE run_id = ?1";
    sqlite3_stmt *stmt;
    const int got = query_row(db, SQL, &r->id, 1, &stmt, err);
    if (got < 0) return -1;
    if (got) {
        r->evals = sqlite3_column_int(stmt, 0);
        r->min_val_loss = col_real(stmt, 1);
        r->last_val_step = sqlite3_column_int(stmt, 2);
        r->last_val_loss = col_real(stmt, 3);
        sqlite3_reset(stmt);
    }
    return 0;
}

// Steps done, last and min loss, median tokens/s, mean bubble and its parts.
static int run_add_stats(Db *db, DbRunInfo *r, Error *err) {
    static const char COUNTS[] =
        "SELECT count(*), coalesce(max(step), 0), min(loss), avg(bubble), count(tokens_per_s), avg(bubble_ideal), "
        "avg(bubble_imbalance), avg(bubble_transfer), avg(bubble_contention), "
        "min(CASE WHEN tokens_per_s IS NOT NULL THEN step END) FROM steps WHERE run_id = ?";
    static const char LAST[] = "SELECT loss FROM steps WHERE run_id = ? ORDER BY step DESC LIMIT 1";
    sqlite3_stmt *stmt;
    int got = query_row(db, COUNTS, &r->id, 1, &stmt, err);
    if (got < 0) return -1;
    int64_t n_rates = 0, first_rated = 0;
    if (got) {
        r->steps_done = sqlite3_column_int(stmt, 0);
        r->last_step = sqlite3_column_int(stmt, 1);
        r->min_loss = col_real(stmt, 2);
        r->mean_bubble = col_real(stmt, 3);
        n_rates = sqlite3_column_int64(stmt, 4);
        r->mean_ideal = col_real(stmt, 5);
        r->mean_imbalance = col_real(stmt, 6);
        r->mean_transfer = col_real(stmt, 7);
        r->mean_contention = col_real(stmt, 8);
        first_rated = sqlite3_column_int64(stmt, 9);
        sqlite3_reset(stmt);
    }
    if ((got = query_row(db, LAST, &r->id, 1, &stmt, err)) < 0) return -1;
    if (got) {
        r->last_loss = col_real(stmt, 0);
        sqlite3_reset(stmt);
    }
    if (n_rates > 0 && run_median_rate(db, r, n_rates, first_rated, err)) return -1;
    return run_add_val_stats(db, r, err);
}

// 'crashed' and 'running' are told apart here: both are stored as 'running'.
static bool run_matches(const DbRunInfo *r, const char *status) {
    if (!status) return true;
    if (strcmp(status, "crashed") == 0) return r->crashed;
    if (strcmp(status, "running") == 0) return !r->crashed;
    return true;
}

static int runs_select(Db *db, const DbRunFilter *f, DbRunInfo **out, int *n, Error *err) {
    static const char SQL[] =
        "SELECT " RUN_COLUMNS " FROM runs WHERE (?1 IS NULL OR schedule = ?1) AND (?2 IS NULL OR status = ?2) "
        "AND (?3 IS NULL OR started_at >= ?3) ORDER BY id DESC";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    const char *stored = f->status && strcmp(f->status, "crashed") == 0 ? "running" : f->status;
    int bound = (f->schedule ? sqlite3_bind_text(stmt, 1, f->schedule, -1, SQLITE_TRANSIENT) : SQLITE_OK) |
                (stored ? sqlite3_bind_text(stmt, 2, stored, -1, SQLITE_TRANSIENT) : SQLITE_OK) |
                (f->since ? sqlite3_bind_text(stmt, 3, f->since, -1, SQLITE_TRANSIENT) : SQLITE_OK);
    int rc, cap = 0;
    while ((rc = step_if(stmt, bound)) == SQLITE_ROW && (f->limit <= 0 || *n < f->limit)) {
        DbRunInfo r;
        run_from_row(stmt, &r);
        if (!run_matches(&r, f->status)) {
            db_run_info_clear(&r);
            continue;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            *out = xrealloc(*out, (size_t)cap * sizeof **out);
        }
        (*out)[(*n)++] = r;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) db_fail(db, err, "listing runs");
    sqlite3_reset(stmt);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

int db_runs_list(Db *db, const DbRunFilter *filter, DbRunInfo **out, int *n, Error *err) {
    *out = NULL;
    *n = 0;
    if (db_read_begin(db, err)) return -1;
    int rc = runs_select(db, filter, out, n, err);
    for (int i = 0; i < *n && rc == 0; i++) rc = run_add_stats(db, &(*out)[i], err);
    db_read_end(db);
    if (rc) {
        db_runs_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

static int run_select_one(Db *db, int64_t id, DbRunInfo *out, Error *err) {
    static const char SQL[] = "SELECT " RUN_COLUMNS " FROM runs WHERE id = ?";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int rc = step_if(stmt, sqlite3_bind_int64(stmt, 1, id));
    if (rc == SQLITE_ROW) run_from_row(stmt, out);
    else if (rc == SQLITE_DONE) error_set(err, "%s: no run %lld", db_path(db), (long long)id);
    else db_fail(db, err, "reading a run");
    sqlite3_reset(stmt);
    return rc == SQLITE_ROW ? 0 : -1;
}

int db_run_get(Db *db, int64_t id, DbRunInfo *out, Error *err) {
    *out = (DbRunInfo){0};
    if (db_read_begin(db, err)) return -1;
    int rc = run_select_one(db, id, out, err);
    if (rc == 0) rc = run_add_stats(db, out, err);
    db_read_end(db);
    if (rc) db_run_info_clear(out);
    return rc;
}

int64_t db_run_latest(Db *db, Error *err) {
    static const char SQL[] = "SELECT coalesce(max(id), 0) FROM runs";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int rc = sqlite3_step(stmt);
    int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : -1;
    if (rc != SQLITE_ROW) db_fail(db, err, "finding the latest run");
    sqlite3_reset(stmt);
    return id;
}

// ---- steps, stages, checkpoints --------------------------------------------------------------

// Grows *out by one element of size bytes when *n reaches *cap.
static void *grow(void *out, int n, int *cap, size_t size) {
    if (n < *cap) return out;
    *cap = *cap ? 2 * *cap : 64;
    return xrealloc(out, (size_t)*cap * size);
}

int db_steps_read(Db *db, int64_t run, int last_n, DbStep **out, int *n, Error *err) {
    static const char SQL[] =
        "SELECT * FROM (SELECT step, loss, lr, grad_norm, tokens_per_s, step_ms, gflops, bubble, bubble_ideal, "
        "bubble_imbalance, bubble_transfer, bubble_contention FROM steps "
        "WHERE run_id = ? ORDER BY step DESC LIMIT ?) ORDER BY step";
    *out = NULL;
    *n = 0;
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int bound = sqlite3_bind_int64(stmt, 1, run) | sqlite3_bind_int(stmt, 2, last_n > 0 ? last_n : -1);
    int rc, cap = 0;
    while ((rc = step_if(stmt, bound)) == SQLITE_ROW) {
        *out = grow(*out, *n, &cap, sizeof **out);
        (*out)[(*n)++] = (DbStep){
            .step = sqlite3_column_int(stmt, 0), .loss = col_real(stmt, 1), .lr = col_real(stmt, 2),
            .grad_norm = col_real(stmt, 3), .tokens_per_s = col_real(stmt, 4), .step_ms = col_real(stmt, 5),
            .gflops = col_real(stmt, 6), .bubble = col_real(stmt, 7), .bubble_ideal = col_real(stmt, 8),
            .bubble_imbalance = col_real(stmt, 9), .bubble_transfer = col_real(stmt, 10),
            .bubble_contention = col_real(stmt, 11)};
    }
    if (rc != SQLITE_DONE) db_fail(db, err, "reading steps");
    sqlite3_reset(stmt);
    if (rc == SQLITE_DONE) return 0;
    free(*out);
    *out = NULL;
    *n = 0;
    return -1;
}

int db_evals_read(Db *db, int64_t run, DbEval **out, int *n, Error *err) {
    static const char SQL[] = "SELECT step, val_loss, batches FROM evals WHERE run_id = ? ORDER BY step";
    *out = NULL;
    *n = 0;
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int bound = sqlite3_bind_int64(stmt, 1, run);
    int rc, cap = 0;
    while ((rc = step_if(stmt, bound)) == SQLITE_ROW) {
        *out = grow(*out, *n, &cap, sizeof **out);
        (*out)[(*n)++] = (DbEval){.step = sqlite3_column_int(stmt, 0), .val_loss = col_real(stmt, 1),
                                  .batches = sqlite3_column_int(stmt, 2)};
    }
    if (rc != SQLITE_DONE) db_fail(db, err, "reading validation losses");
    sqlite3_reset(stmt);
    if (rc == SQLITE_DONE) return 0;
    free(*out);
    *out = NULL;
    *n = 0;
    return -1;
}

void db_samples_free(DbSample *s, int n) {
    for (int i = 0; s && i < n; i++) free(s[i].text);
    free(s);
}

int db_samples_read(Db *db, int64_t run, DbSample **out, int *n, Error *err) {
    static const char SQL[] = "SELECT step, tokens, seconds, text FROM samples WHERE run_id = ? ORDER BY step";
    *out = NULL;
    *n = 0;
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int bound = sqlite3_bind_int64(stmt, 1, run);
    int rc, cap = 0;
    while ((rc = step_if(stmt, bound)) == SQLITE_ROW) {
        *out = grow(*out, *n, &cap, sizeof **out);
        const int len = sqlite3_column_bytes(stmt, 3);
        char *text = xmalloc((size_t)len + 1);
        if (len) memcpy(text, sqlite3_column_blob(stmt, 3), (size_t)len);
        text[len] = '\0';
        (*out)[(*n)++] = (DbSample){.step = sqlite3_column_int(stmt, 0), .tokens = sqlite3_column_int(stmt, 1),
                                    .seconds = col_real(stmt, 2), .text = text};
    }
    if (rc != SQLITE_DONE) db_fail(db, err, "reading samples");
    sqlite3_reset(stmt);
    if (rc == SQLITE_DONE) return 0;
    db_samples_free(*out, *n);
    *out = NULL;
    *n = 0;
    return -1;
}

int db_stage_summary(Db *db, int64_t run, DbStageSummary **out, int *n, Error *err) {
    static const char SQL[] =
        "SELECT stage, count(DISTINCT rank), count(DISTINCT step), avg(busy_ms), avg(between_ms), avg(sendrecv_ms), "
        "sum(busy_ms) / nullif(total(busy_ms) + total(between_ms) + total(sendrecv_ms), 0), max(peak_act_bytes), "
        "avg(transfer_ms), avg(wait_ms) FROM stage_steps WHERE run_id = ? GROUP BY stage ORDER BY stage";
    *out = NULL;
    *n = 0;
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int bound = sqlite3_bind_int64(stmt, 1, run);
    int rc, cap = 0;
    while ((rc = step_if(stmt, bound)) == SQLITE_ROW) {
        *out = grow(*out, *n, &cap, sizeof **out);
        (*out)[(*n)++] = (DbStageSummary){
            .stage = sqlite3_column_int(stmt, 0), .ranks = sqlite3_column_int(stmt, 1),
            .steps = sqlite3_column_int(stmt, 2), .busy_ms = col_real(stmt, 3), .between_ms = col_real(stmt, 4),
            .sendrecv_ms = col_real(stmt, 5), .busy_frac = col_real(stmt, 6),
            .peak_act_bytes = sqlite3_column_int64(stmt, 7), .transfer_ms = col_real(stmt, 8),
            .wait_ms = col_real(stmt, 9)};
    }
    if (rc != SQLITE_DONE) db_fail(db, err, "reading stage timings");
    sqlite3_reset(stmt);
    if (rc == SQLITE_DONE) return 0;
    free(*out);
    *out = NULL;
    *n = 0;
    return -1;
}

void db_checkpoints_free(DbCheckpointInfo *cks, int n) {
    for (int i = 0; i < n; i++) {
        free(cks[i].dir);
        free(cks[i].created_at);
        free(cks[i].status);
        free(cks[i].error);
    }
    free(cks);
}

int db_checkpoints_read(Db *db, int64_t run, DbCheckpointInfo **out, int *n, Error *err) {
    static const char SQL[] =
        "SELECT c.id, c.step, c.dir, c.created_at, c.status, c.error, c.bytes, "
        "(SELECT count(*) FROM checkpoint_files f WHERE f.checkpoint_id = c.id) "
        "FROM checkpoints c WHERE c.run_id = ? ORDER BY c.step, c.id";
    *out = NULL;
    *n = 0;
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int bound = sqlite3_bind_int64(stmt, 1, run);
    int rc, cap = 0;
    while ((rc = step_if(stmt, bound)) == SQLITE_ROW) {
        *out = grow(*out, *n, &cap, sizeof **out);
        char *dir = col_text(stmt, 2);
        (*out)[(*n)++] = (DbCheckpointInfo){
            .id = sqlite3_column_int64(stmt, 0), .step = sqlite3_column_int(stmt, 1), .dir = db_checkpoint_dir(db, dir),
            .created_at = col_text(stmt, 3), .status = col_text(stmt, 4), .error = col_text(stmt, 5),
            .bytes = sqlite3_column_int64(stmt, 6), .files = sqlite3_column_int(stmt, 7)};
        free(dir);
    }
    if (rc != SQLITE_DONE) db_fail(db, err, "reading checkpoints");
    sqlite3_reset(stmt);
    if (rc == SQLITE_DONE) return 0;
    db_checkpoints_free(*out, *n);
    *out = NULL;
    *n = 0;
    return -1;
}

int db_checkpoint_files_read(Db *db, int64_t checkpoint, DbCheckpointFile **out, int *n, Error *err) {
    static const char SQL[] =
        "SELECT path, bytes, sha256, stage FROM checkpoint_files WHERE checkpoint_id = ? ORDER BY path";
    *out = NULL;
    *n = 0;
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int bound = sqlite3_bind_int64(stmt, 1, checkpoint);
    int rc, cap = 0;
    while ((rc = step_if(stmt, bound)) == SQLITE_ROW) {
        *out = grow(*out, *n, &cap, sizeof **out);
        DbCheckpointFile *f = &(*out)[(*n)++];
        memset(f, 0, sizeof *f);
        snprintf(f->path, sizeof f->path, "%s", (const char *)sqlite3_column_text(stmt, 0));
        f->bytes = sqlite3_column_int64(stmt, 1);
        snprintf(f->sha256, sizeof f->sha256, "%s", (const char *)sqlite3_column_text(stmt, 2));
        f->stage = sqlite3_column_int(stmt, 3);
    }
    if (rc != SQLITE_DONE) db_fail(db, err, "reading a checkpoint's files");
    sqlite3_reset(stmt);
    if (rc == SQLITE_DONE) return 0;
    free(*out);
    *out = NULL;
    *n = 0;
    return -1;
}
