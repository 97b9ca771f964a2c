// storage/db: opening the run store, its schema and migrations, and everything rank 0 writes.
//
// The run store schema (PRAGMA application_id 0x70707472 "pptr", PRAGMA user_version 6).
// Timestamps are ISO-8601 UTC with milliseconds ("2025-03-01T14:02:07.123Z"), so they sort as
// text. A NaN measurement is stored as NULL. Version 1 is DESIGN.md's minimum schema; versions 2
// and 3 add the columns marked (v2) and (v3), version 4 the table evals, version 5 samples.
//
// runs: one row per training run.
//   id            INTEGER PRIMARY KEY
//   started_at    TEXT     when the run was recorded
//   ended_at      TEXT     when it finished, failed or stopped; NULL while running
//   status        TEXT     running | finished | failed | stopped
//   error         TEXT     the one-line error of a failed run; NULL otherwise
//   schedule      TEXT     gpipe, 1f1b, interleaved-1f1b, looped-bfs, zb-h1, zb-v, or a CSV path
//   stages        INTEGER  P, pipeline ranks
//   virtual       INTEGER  V, stages per rank
//   dp            INTEGER  D, data-parallel replicas
//   microbatches  INTEGER  M, microbatches per step
//   batch         INTEGER  B, sequences per step (all replicas)
//   seq_len       INTEGER  T, tokens per sequence
//   model         TEXT     preset name or config.json path
//   params        INTEGER  parameter count
//   lr            REAL     peak learning rate
//   seed          INTEGER  init and data-order seed (seeds >= 2^63 read back negative in SQL)
//   transport     TEXT     local | mpi | nccl
//   device        TEXT     cpu | cuda
//   resumed_from  INTEGER  the run whose checkpoint this run resumed (runs.id); NULL: fresh
//   config_json   TEXT     the full run configuration, a JSON object
//   steps_planned INTEGER  steps the run was asked for
//   host          TEXT     (v2) host name of the writing process (rank 0)
//   pid           INTEGER  (v2) its process id; with host, tells a live run from a crashed one
//   heartbeat_at  TEXT     (v2) the run's last commit; a crashed run ended near here
//   host_cores    INTEGER  (v3) CPU cores the writing process could use
//   host_ranks    INTEGER  (v3) the run's rank threads or processes on that host: more than
//                          host_cores is CPU oversubscription
// steps: one row per optimizer step, committed in batches of up to 50 steps or 1 s.
//   run_id        INTEGER  runs.id          } PRIMARY KEY
//   step          INTEGER  1-based          }
//   loss          REAL     mean over the batch's non-pad target tokens
//   lr            REAL     learning rate applied at this step
//   grad_norm     REAL     global gradient norm before clipping
//   tokens_per_s  REAL     B*T / step time
//   step_ms       REAL     wall time of the step
//   bubble        REAL     measured idle fraction of the step, 0..1; NULL: not measured
//   gflops        REAL     (v2) achieved model GFLOP/s
//   bubble_ideal, bubble_imbalance, bubble_transfer, bubble_contention
//                 REAL     (v3) the bubble's parts, adding up to bubble (engine/telemetry.h):
//                          the schedule's own at the step's mean costs, stage imbalance,
//                          message transfer, and the rest (CPU oversubscription, jitter)
// stage_steps: one row per step, stage and rank: where each rank's step time went.
//   run_id, step, stage, rank   INTEGER  PRIMARY KEY (stage counts virtual stages)
//   busy_ms       REAL     computing (F, B, I, W)
//   between_ms    REAL     (v6; idle_ms before) its rank's time outside every action
//   sendrecv_ms   REAL     (v6; comm_ms before) inside the stage's sends and receives of
//                          activations and gradients, a blocked receive's wait included
//   peak_act_bytes INTEGER activation memory high-water mark of the step
//   transfer_ms   REAL     (v3) of sendrecv_ms, moving this stage's messages
//   wait_ms       REAL     (v3) its rank's non-busy time beyond transfer: waiting for a peer,
//                          its share of the bubble. busy + transfer + wait is the rank's step,
//                          as busy + sendrecv + between is: two cuts of one time.
// checkpoints: one row per checkpoint; counts only when status is 'complete'.
//   id            INTEGER PRIMARY KEY
//   run_id        INTEGER  runs.id
//   step          INTEGER  the last step it contains
//   dir           TEXT     its directory
//   created_at    TEXT     when writing began
//   bytes         INTEGER  total of its files (set on completion)
//   status        TEXT     writing | complete | failed
//   completed_at  TEXT     (v2) when it became complete or failed
//   error         TEXT     (v2) why it failed
// checkpoint_files: the manifest, one row per durable file.
//   checkpoint_id INTEGER  checkpoints.id   } PRIMARY KEY
//   path          TEXT     relative to dir  }
//   bytes         INTEGER
//   sha256        TEXT     64 lowercase hex digits
//   stage         INTEGER  the stage whose shard it is; NULL: index, config or trainer state
// evals: (v4) one row per validation pass (--val-data, --val-every; engine/train_loop.c).
//   run_id        INTEGER  runs.id          } PRIMARY KEY
//   step          INTEGER  the optimizer steps done when it ran (steps.step of the step before it)
//   val_loss      REAL     mean of the held-out batches' losses (each over its non-pad target
//                          tokens), forward only
//   batches       INTEGER  held-out batches evaluated
// samples: (v5) one row per sample of the model (train --sample-every; engine/train_loop.c).
//   run_id        INTEGER  runs.id          } PRIMARY KEY
//   step          INTEGER  the optimizer steps done when it was taken
//   tokens        INTEGER  new tokens, greedy, after --sample-prompt
//   seconds       REAL     the time it took, outside every step's step_ms
//   text          BLOB     the tokenizer's decoding, as the model wrote it (not always UTF-8)
// Indexes: runs(started_at), runs(status) (v2), checkpoints(run_id, step); steps and
// stage_steps are clustered on their primary keys (WITHOUT ROWID).
#include "storage/db.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DB_BUSY_TIMEOUT_MS 5000
#define DB_STMT_CACHE 48
#define DB_RETRY_MAX_MS 30000        // the longest pause between retries of a busy step commit

// Migration k (MIGRATIONS[k - 1]) takes user_version k - 1 to k. Append, never edit.
static const char *const MIGRATIONS[DB_SCHEMA_VERSION] = {
    // 1: DESIGN.md's minimum schema.
    "PRAGMA application_id = 1886418034;\n"
    "CREATE TABLE runs (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  started_at TEXT NOT NULL,\n"
    "  ended_at TEXT,\n"
    "  status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'failed', 'stopped')),\n"
    "  error TEXT,\n"
    "  schedule TEXT, stages INTEGER, virtual INTEGER, dp INTEGER, microbatches INTEGER,\n"
    "  batch INTEGER, seq_len INTEGER, model TEXT, params INTEGER, lr REAL, seed INTEGER,\n"
    "  transport TEXT, device TEXT,\n"
    "  resumed_from INTEGER REFERENCES runs(id) ON DELETE SET NULL,\n"
    "  config_json TEXT,\n"
    "  steps_planned INTEGER\n"
    ");\n"
    "CREATE INDEX runs_started ON runs(started_at);\n"
    "CREATE TABLE steps (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  step INTEGER NOT NULL,\n"
    "  loss REAL, lr REAL, grad_norm REAL, tokens_per_s REAL, step_ms REAL, bubble REAL,\n"
    "  PRIMARY KEY (run_id, step)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE stage_steps (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  step INTEGER NOT NULL, stage INTEGER NOT NULL, rank INTEGER NOT NULL,\n"
    "  busy_ms REAL, idle_ms REAL, comm_ms REAL, peak_act_bytes INTEGER,\n"
    "  PRIMARY KEY (run_id, step, stage, rank)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE checkpoints (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  step INTEGER NOT NULL,\n"
    "  dir TEXT NOT NULL,\n"
    "  created_at TEXT NOT NULL,\n"
    "  bytes INTEGER NOT NULL DEFAULT 0,\n"
    "  status TEXT NOT NULL CHECK (status IN ('writing', 'complete', 'failed'))\n"
    ");\n"
    "CREATE INDEX checkpoints_run ON checkpoints(run_id, step);\n"
    "CREATE TABLE checkpoint_files (\n"
    "  checkpoint_id INTEGER NOT NULL REFERENCES checkpoints(id) ON DELETE CASCADE,\n"
    "  path TEXT NOT NULL, bytes INTEGER NOT NULL, sha256 TEXT NOT NULL, stage INTEGER,\n"
    "  PRIMARY KEY (checkpoint_id, path)\n"
    ") WITHOUT ROWID;\n",
    // 2: liveness (tell a crashed run from a live one), GFLOP/s, checkpoint outcomes.
    "ALTER TABLE runs ADD COLUMN host TEXT;\n"
    "ALTER TABLE runs ADD COLUMN pid INTEGER;\n"
    "ALTER TABLE runs ADD COLUMN heartbeat_at TEXT;\n"
    "CREATE INDEX runs_status ON runs(status);\n"
    "ALTER TABLE steps ADD COLUMN gflops REAL;\n"
    "ALTER TABLE checkpoints ADD COLUMN completed_at TEXT;\n"
    "ALTER TABLE checkpoints ADD COLUMN error TEXT;\n",
    // 3: the bubble told truthfully: transfer apart from waiting, the bubble's parts, the host's load.
    "ALTER TABLE runs ADD COLUMN host_cores INTEGER;\n"
    "ALTER TABLE runs ADD COLUMN host_ranks INTEGER;\n"
    "ALTER TABLE steps ADD COLUMN bubble_ideal REAL;\n"
    "ALTER TABLE steps ADD COLUMN bubble_imbalance REAL;\n"
    "ALTER TABLE steps ADD COLUMN bubble_transfer REAL;\n"
    "ALTER TABLE steps ADD COLUMN bubble_contention REAL;\n"
    "ALTER TABLE stage_steps ADD COLUMN transfer_ms REAL;\n"
    "ALTER TABLE stage_steps ADD COLUMN wait_ms REAL;\n",
    // 4: the validation loss, a row per pass.
    "CREATE TABLE evals (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  step INTEGER NOT NULL,\n"
    "  val_loss REAL, batches INTEGER,\n"
    "  PRIMARY KEY (run_id, step)\n"
    ") WITHOUT ROWID;\n",
    // 5: samples of the model as it trains.
    "CREATE TABLE samples (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  step INTEGER NOT NULL,\n"
    "  tokens INTEGER, seconds REAL, text BLOB,\n"
    "  PRIMARY KEY (run_id, step)\n"
    ") WITHOUT ROWID;\n",
    // 6: one word per idea (issue 29): "wait" is the bubble's time, so the two columns that cut a
    // rank's step another way are named for what they hold. Same values, new names.
    ("ALTER TABLE stage_steps RENAME COLUMN idle_ms TO between_ms;\n"
     "ALTER TABLE stage_steps RENAME COLUMN comm_ms TO sendrecv_ms;\n"),
};

// A buffered step: its run, the step, and its stage rows [stage0, stage0 + n_stages).
typedef struct {
    int64_t run;
    DbStep step;
    int stage0, n_stages;
} DbPendingStep;

typedef struct {
    int64_t run;
    DbEval eval;
} DbPendingEval;

typedef struct {
    int64_t run;
    DbSample sample;                 // its text a copy, freed once written or discarded
} DbPendingSample;

struct Db {
    sqlite3 *sql;
    char *path;
    bool writer;
    int read_depth;                  // nesting of db_read_begin
    struct {
        const char *text;
        sqlite3_stmt *stmt;
    } cache[DB_STMT_CACHE];
    int n_cached;
    DbPendingStep *pending;          // steps not yet committed
    int n_pending, cap_pending;
    DbStageStep *pending_stages;
    int n_pending_stages, cap_pending_stages;
    DbPendingEval *pending_evals;    // validation passes not yet committed (with the steps)
    int n_pending_evals, cap_pending_evals;
    DbPendingSample *pending_samples;  // samples not yet committed (with the steps)
    int n_pending_samples, cap_pending_samples;
    double last_commit_ms;           // monotonic
    double retry_at_ms;              // after a busy commit: no step commit is tried before this
    double retry_pause_ms;           // the pause after the last busy commit (doubles, up to DB_RETRY_MAX_MS)
    int busy_timeout_ms;             // the lock wait of an ordinary write
    int last_failure;                // SQLite's primary result code at the last db_fail; 0: none
    int held_fd;                     // the writer's own descriptor of its file (-1: none): a
    dev_t dev;                       // deleted or replaced store is noticed at the next commit,
    ino_t ino;                       // and while it is held no new file can take its inode
};

static void clear_pending_samples(Db *db) {
    for (int i = 0; i < db->n_pending_samples; i++) free(db->pending_samples[i].sample.text);
    db->n_pending_samples = 0;
}

#define xrealloc(p, bytes) check_alloc(realloc((p), (bytes)), (bytes), __FILE__, __LINE__)

// ---- helpers ----------------------------------------------------------------------------

static double monotonic_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// ISO-8601 UTC with milliseconds; buf holds at least 32 bytes.
static void now_iso(char *buf) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, 24, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, 32 - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

int db_fail(Db *db, Error *err, const char *what) {
    db->last_failure = sqlite3_errcode(db->sql) & 0xff;
    error_set(err, "%s: %s: %s", db->path, what, sqlite3_errmsg(db->sql));
    return -1;
}

sqlite3_stmt *db_stmt(Db *db, const char *sql, Error *err) {
    for (int i = 0; i < db->n_cached; i++) {
        if (db->cache[i].text == sql) {
            sqlite3_reset(db->cache[i].stmt);
            sqlite3_clear_bindings(db->cache[i].stmt);
            return db->cache[i].stmt;
        }
    }
    assert(db->n_cached < DB_STMT_CACHE && "raise DB_STMT_CACHE");
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v3(db->sql, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, NULL) != SQLITE_OK) {
        db_fail(db, err, "preparing a statement");
        return NULL;
    }
    db->cache[db->n_cached].text = sql;
    db->cache[db->n_cached].stmt = stmt;
    db->n_cached++;
    return stmt;
}

int db_exec(Db *db, const char *sql, const char *what, Error *err) {
    if (sqlite3_exec(db->sql, sql, NULL, NULL, NULL) != SQLITE_OK) return db_fail(db, err, what);
    return 0;
}

// Runs a statement that returns no rows and resets it. bound: its sqlite3_bind_* results
// OR-ed together (SQLITE_OK is 0), so that a failed bind fails the statement.
int db_step_done(Db *db, sqlite3_stmt *stmt, int bound, const char *what, Error *err) {
    int rc = bound == SQLITE_OK ? sqlite3_step(stmt) : bound;
    if (rc != SQLITE_DONE) db_fail(db, err, what);
    sqlite3_reset(stmt);
    return rc == SQLITE_DONE ? 0 : -1;
}

static int bind_real(sqlite3_stmt *stmt, int i, double v) {
    return isnan(v) ? sqlite3_bind_null(stmt, i) : sqlite3_bind_double(stmt, i, v);
}

static int bind_text(sqlite3_stmt *stmt, int i, const char *s) {
    return s ? sqlite3_bind_text(stmt, i, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(stmt, i);
}

int db_rollback(Db *db) {
    return sqlite3_exec(db->sql, "ROLLBACK", NULL, NULL, NULL);
}

bool db_is_writer(const Db *db) { return db->writer; }

int db_read_begin(Db *db, Error *err) {
    if (db->read_depth++ > 0 || !sqlite3_get_autocommit(db->sql)) return 0;
    if (db_exec(db, "BEGIN", "starting a read", err)) {
        db->read_depth--;
        return -1;
    }
    return 0;
}

void db_read_end(Db *db) {
    assert(db->read_depth > 0);
    if (--db->read_depth == 0 && !sqlite3_get_autocommit(db->sql)) db_rollback(db);
}

const char *db_path(const Db *db) {
    return db->path;
}

// ---- opening ------------------------------------------------------------------------------

// Refuses, without letting SQLite touch it, a path that is missing (readers) or that is not
// a SQLite file: an empty file is an empty database; anything else must carry the header.
static int db_sniff(const char *path, bool create, Error *err) {
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT && create) return 0;
        if (errno == ENOENT) error_set(err, "%s: no such run store (pptrain train --db %s creates one)", path, path);
        else error_set(err, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        error_set(err, "%s: not a regular file", path);
        return -1;
    }
    if (st.st_size == 0) return 0;
    static const char MAGIC[16] = "SQLite format 3";
    char head[16] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        error_set(err, "%s: %s", path, strerror(errno));
        return -1;
    }
    ssize_t got = read(fd, head, sizeof head);
    close(fd);
    if (got != (ssize_t)sizeof head || memcmp(head, MAGIC, sizeof MAGIC) != 0) {
        error_set(err, "%s: not a SQLite database, so not a pptrain run store (left unchanged)", path);
        return -1;
    }
    return 0;
}

static int pragma_int(Db *db, const char *sql, int *out, Error *err) {
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(db->sql, sql, -1, &stmt, NULL) != SQLITE_OK) return db_fail(db, err, "reading the header");
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) *out = sqlite3_column_int(stmt, 0);
    else db_fail(db, err, "reading the header");
    sqlite3_finalize(stmt);
    return rc == SQLITE_ROW ? 0 : -1;
}

// Reads the schema version; refuses a newer one and a database that is not ours.
static int db_check_store(Db *db, bool create, int *version, Error *err) {
    int app_id, tables;
    if (pragma_int(db, "PRAGMA user_version", version, err) || pragma_int(db, "PRAGMA application_id", &app_id, err) ||
        pragma_int(db, "SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'", &tables, err))
        return -1;
    if (*version > DB_SCHEMA_VERSION) {
        error_set(err, "%s: schema version %d is newer than this pptrain (%d); upgrade pptrain", db->path, *version,
                  DB_SCHEMA_VERSION);
        return -1;
    }
    if (*version > 0 && app_id != DB_APPLICATION_ID) {
        error_set(err, "%s: a SQLite database but not a pptrain run store (application_id %d, user_version %d); "
                       "refusing to change it", db->path, app_id, *version);
        return -1;
    }
    if (*version == 0 && tables > 0) {
        error_set(err, "%s: a SQLite database but not a pptrain run store (it has %d tables and no pptrain schema "
                       "version); refusing to change it", db->path, tables);
        return -1;
    }
    if (*version == 0 && !create) {
        error_set(err, "%s: an empty SQLite database, not a pptrain run store", db->path);
        return -1;
    }
    return 0;
}

// DB_BUSY_TIMEOUT_MS, or PPTRAIN_TEST_DB_BUSY_MS: a test's hook, so that a lock held for a
// second or two outlasts the wait without making the test slow.
static int db_busy_timeout_default(void) {
    const char *test = getenv("PPTRAIN_TEST_DB_BUSY_MS");
    const int ms = test ? atoi(test) : 0;
    return ms > 0 ? ms : DB_BUSY_TIMEOUT_MS;
}

static Db *db_connect(const char *path, int flags, Error *err) {
    Db *db = xcalloc(1, sizeof *db);
    db->held_fd = -1;
    db->path = strdup(path);
    check_alloc(db->path, strlen(path) + 1, __FILE__, __LINE__);
    db->writer = (flags & SQLITE_OPEN_READWRITE) != 0;
    db->last_commit_ms = monotonic_ms();
    if (sqlite3_open_v2(path, &db->sql, flags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        if (db->sql) db_fail(db, err, "opening");
        else error_set(err, "%s: opening: out of memory", path);
        db_close(db);
        return NULL;
    }
    sqlite3_extended_result_codes(db->sql, 1);
    db->busy_timeout_ms = db_busy_timeout_default();
    sqlite3_busy_timeout(db->sql, db->busy_timeout_ms);
    return db;
}

// PRAGMA quick_check: a store with a damaged page is refused whole, before anything reads it
// or writes into it (writing would spread the damage; reading would show an untrue history).
// Returns -2, err untouched, when SQLite cannot open the file at all (SQLITE_CANTOPEN): an
// intact store it may not create its -shm file beside (db_open_reader) is not damaged.
static int db_check_intact(Db *db, Error *err) {
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(db->sql, "PRAGMA quick_check(1)", -1, &stmt, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
    if ((sqlite3_extended_errcode(db->sql) & 0xff) == SQLITE_CANTOPEN) {
        sqlite3_finalize(stmt);
        return -2;
    }
    const char *verdict = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(stmt, 0) : sqlite3_errmsg(db->sql);
    const bool intact = rc == SQLITE_ROW && verdict && strcmp(verdict, "ok") == 0;
    if (!intact)
        error_set(err, "%s: the run store is damaged (quick_check: %.200s); refusing to use it: restore a copy, or "
                       "salvage it with: sqlite3 %s .recover", db->path, verdict ? verdict : "no answer", db->path);
    sqlite3_finalize(stmt);
    return intact ? 0 : -1;
}

// PPTRAIN_TEST_DB_MAX_PAGES: a test's hook that caps the store's size (PRAGMA max_page_count),
// so that a write past it fails as on a full disk (SQLITE_FULL).
static int db_apply_test_cap(Db *db, Error *err) {
    const char *cap = getenv("PPTRAIN_TEST_DB_MAX_PAGES");
    if (!cap || atoi(cap) <= 0) return 0;
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA max_page_count = %d", atoi(cap));
    return db_exec(db, sql, "capping the store's size", err);
}

static int db_set_wal(Db *db, Error *err) {
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(db->sql, "PRAGMA journal_mode = WAL", -1, &stmt, NULL) != SQLITE_OK)
        return db_fail(db, err, "setting WAL mode");
    int rc = sqlite3_step(stmt);
    char mode[16] = "";
    if (rc == SQLITE_ROW) snprintf(mode, sizeof mode, "%s", (const char *)sqlite3_column_text(stmt, 0));
    else db_fail(db, err, "setting WAL mode");
    sqlite3_finalize(stmt);
    if (rc != SQLITE_ROW) return -1;
    if (strcmp(mode, "wal") != 0) {
        error_set(err, "%s: cannot use WAL mode (journal_mode stays '%s'); keep the store on a local disk", db->path,
                  mode);
        return -1;
    }
    return 0;
}

// Applies migrations version+1 .. DB_SCHEMA_VERSION in one IMMEDIATE transaction, rechecking
// the version under the lock (another process may have migrated meanwhile).
static int db_migrate(Db *db, Error *err) {
    if (db_exec(db, "BEGIN IMMEDIATE", "locking for migration", err)) return -1;
    int version;
    if (db_check_store(db, true, &version, err)) goto fail;
    for (int k = version + 1; k <= DB_SCHEMA_VERSION; k++) {
        char what[64], set_version[64];
        snprintf(what, sizeof what, "migrating to schema version %d", k);
        snprintf(set_version, sizeof set_version, "PRAGMA user_version = %d", k);
        if (db_exec(db, MIGRATIONS[k - 1], what, err) || db_exec(db, set_version, what, err)) goto fail;
    }
    if (db_exec(db, "COMMIT", "committing the migration", err)) goto fail;
    return 0;
fail:
    db_rollback(db);
    return -1;
}

// The writer's connection: WAL, NORMAL sync (durable at checkpoints, never corrupt), foreign
// keys, current schema.
static Db *db_open_writer(const char *path, int flags, Error *err) {
    Db *db = db_connect(path, flags, err);
    if (!db) return NULL;
    int version;
    const int intact = db_check_intact(db, err);
    if (intact == -2)
        error_set(err, "%s: cannot write the run store: its folder takes no new file (a read-only mount, or a "
                       "folder this user cannot write); the store itself is intact", path);
    if (intact || db_check_store(db, true, &version, err) || db_set_wal(db, err) ||
        db_apply_test_cap(db, err) ||
        db_exec(db, "PRAGMA synchronous = NORMAL", "setting synchronous", err) ||
        db_exec(db, "PRAGMA foreign_keys = ON", "enabling foreign keys", err) ||
        (version < DB_SCHEMA_VERSION && db_migrate(db, err))) {
        db_close(db);
        return NULL;
    }
    struct stat st;
    db->held_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (db->held_fd >= 0 && fstat(db->held_fd, &st) == 0) db->dev = st.st_dev, db->ino = st.st_ino;
    return db;
}

// path as a URI that opens it immutable (read-only media: nothing can change it, so SQLite
// needs no -shm file); the characters a URI gives meaning to are escaped.
static void immutable_uri(const char *path, char *uri, size_t cap) {
    size_t n = (size_t)snprintf(uri, cap, "file:");
    for (const char *c = path; *c && n + 4 < cap; c++)
        n += *c == '%' || *c == '?' || *c == '#' ? (size_t)snprintf(uri + n, cap - n, "%%%02X", (unsigned char)*c)
                                                 : (size_t)snprintf(uri + n, cap - n, "%c", *c);
    snprintf(uri + n, cap - n, "?immutable=1");
}

// A reader of a WAL store needs its -shm file, which SQLite creates beside the store when no
// writer has. On a read-only mount, or in a folder this user cannot write, it cannot: that is
// "cannot write", not damage. With no -wal file (no writer has left changes outside the main
// file) the store is read as an immutable snapshot; with one, it cannot be read in full.
static Db *db_open_reader(const char *path, Error *err) {
    Db *db = db_connect(path, SQLITE_OPEN_READONLY, err);
    if (!db) return NULL;
    const int intact = db_check_intact(db, err);
    if (intact != -2) return intact == 0 ? db : (db_close(db), NULL);
    db_close(db);
    char wal[PATH_MAX + 8], uri[3 * PATH_MAX + 32];
    snprintf(wal, sizeof wal, "%s-wal", path);
    struct stat st;
    if (stat(wal, &st) == 0 && st.st_size > 0) {
        error_set(err, "%s: cannot read the run store here: its folder takes no new file (a read-only mount, or "
                       "a folder this user cannot write) and SQLite needs one beside a store a writer has open",
                  path);
        return NULL;
    }
    immutable_uri(path, uri, sizeof uri);
    db = db_connect(uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, err);
    if (db) {
        free(db->path);   // messages name the file, not the URI
        db->path = strdup(path);
        check_alloc(db->path, strlen(path) + 1, __FILE__, __LINE__);
    }
    if (db && db_check_intact(db, err)) {
        if (!err->msg[0]) error_set(err, "%s: cannot open the run store", path);
        db_close(db);
        return NULL;
    }
    return db;
}

Db *db_open(const char *path, bool create, Error *err) {
    if (db_sniff(path, create, err)) return NULL;
    if (create) return db_open_writer(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, err);
    Db *db = db_open_reader(path, err);
    int version;
    if (!db || db_check_store(db, false, &version, err)) goto fail;
    if (version < DB_SCHEMA_VERSION) {
        // Written by an older pptrain: upgrade in place once, then read.
        db_close(db);
        db = db_open_writer(path, SQLITE_OPEN_READWRITE, err);
        if (!db) return NULL;
        db_close(db);
        db = db_connect(path, SQLITE_OPEN_READONLY, err);
        if (!db || db_check_store(db, false, &version, err)) goto fail;
    }
    return db;
fail:
    if (db) db_close(db);
    return NULL;
}

void db_close(Db *db) {
    if (!db) return;
    Error err;
    if ((db->n_pending || db->n_pending_evals || db->n_pending_samples) && db_flush(db, &err))
        fprintf(stderr, "pptrain: %s\n", err.msg);
    for (int i = 0; i < db->n_cached; i++) sqlite3_finalize(db->cache[i].stmt);
    if (db->sql && sqlite3_close(db->sql) != SQLITE_OK)
        fprintf(stderr, "pptrain: %s: closing: %s\n", db->path, sqlite3_errmsg(db->sql));
    if (db->held_fd >= 0) close(db->held_fd);
    free(db->pending);
    free(db->pending_stages);
    clear_pending_samples(db);
    free(db->pending_samples);
    free(db->pending_evals);
    free(db->path);
    free(db);
}

void db_schema_write(FILE *out) {
    fprintf(out, "-- pptrain run store, schema version %d (see `pptrain history --help`)\nBEGIN;\n", DB_SCHEMA_VERSION);
    for (int k = 1; k <= DB_SCHEMA_VERSION; k++)
        fprintf(out, "-- version %d\n%sPRAGMA user_version = %d;\n", k, MIGRATIONS[k - 1], k);
    fprintf(out, "COMMIT;\n");
}

// ---- runs -----------------------------------------------------------------------------------

int64_t db_run_begin(Db *db, const DbRun *run, Error *err) {
    assert(db->writer);
    if (run->config_json) {
        cJSON *json = cJSON_Parse(run->config_json);
        bool object = cJSON_IsObject(json);
        cJSON_Delete(json);
        if (!object) {
            error_set(err, "%s: recording a run: its config is not a JSON object", db->path);
            return -1;
        }
    }
    static const char SQL[] =
        "INSERT INTO runs (started_at, heartbeat_at, status, schedule, stages, virtual, dp, microbatches, batch, "
        "seq_len, model, params, lr, seed, transport, device, resumed_from, config_json, steps_planned, host, pid, "
        "host_cores, host_ranks) "
        "VALUES (?1, ?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, "
        "?20, ?21)";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    char now[32], host[256] = "";
    now_iso(now);
    gethostname(host, sizeof host - 1);
    int b = bind_text(stmt, 1, now) | bind_text(stmt, 2, run->schedule);
    const int ints[] = {run->stages, run->virtual_stages, run->dp, run->microbatches, run->batch, run->seq_len};
    for (int i = 0; i < 6; i++) b |= sqlite3_bind_int(stmt, 3 + i, ints[i]);
    b |= bind_text(stmt, 9, run->model) | sqlite3_bind_int64(stmt, 10, run->params) | bind_real(stmt, 11, run->lr) |
         sqlite3_bind_int64(stmt, 12, (int64_t)run->seed) | bind_text(stmt, 13, run->transport) |
         bind_text(stmt, 14, run->device) | bind_text(stmt, 16, run->config_json) |
         sqlite3_bind_int(stmt, 17, run->steps_planned) | bind_text(stmt, 18, host) |
         sqlite3_bind_int64(stmt, 19, (int64_t)getpid());
    if (run->resumed_from > 0) b |= sqlite3_bind_int64(stmt, 15, run->resumed_from);
    if (run->host_cores > 0) b |= sqlite3_bind_int(stmt, 20, run->host_cores);
    if (run->host_ranks > 0) b |= sqlite3_bind_int(stmt, 21, run->host_ranks);
    if (db_step_done(db, stmt, b, "recording a run", err)) return -1;
    return sqlite3_last_insert_rowid(db->sql);
}

int db_run_end(Db *db, int64_t run, const char *status, const char *error_or_null, Error *err) {
    return db_run_end_at(db, run, status, error_or_null, NULL, err);
}

int db_run_end_at(Db *db, int64_t run, const char *status, const char *error_or_null, const char *ended_at,
                  Error *err) {
    assert(db->writer);
    if (strcmp(status, "finished") != 0 && strcmp(status, "failed") != 0 && strcmp(status, "stopped") != 0) {
        error_set(err, "%s: ending run %lld: status '%s' is not finished, failed or stopped", db->path,
                  (long long)run, status);
        return -1;
    }
    if (db_flush(db, err)) return -1;
    static const char SQL[] =
        "UPDATE runs SET status = ?1, error = ?2, ended_at = ?3, heartbeat_at = ?3 "
        "WHERE id = ?4 AND status = 'running'";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    char now[32];
    now_iso(now);
    int b = bind_text(stmt, 1, status) | bind_text(stmt, 2, error_or_null) | bind_text(stmt, 3, ended_at ? ended_at : now) |
            sqlite3_bind_int64(stmt, 4, run);
    if (db_step_done(db, stmt, b, "ending a run", err)) return -1;
    if (sqlite3_changes(db->sql) != 1) {
        error_set(err, "%s: ending run %lld: no such running run", db->path, (long long)run);
        return -1;
    }
    return 0;
}

// ---- steps ----------------------------------------------------------------------------------

int db_step_add(Db *db, int64_t run, const DbStep *step, const DbStageStep *stages, int n_stages, Error *err) {
    assert(db->writer && n_stages >= 0 && (stages || n_stages == 0));
    if (db->n_pending == db->cap_pending) {
        db->cap_pending = db->cap_pending ? 2 * db->cap_pending : 2 * DB_FLUSH_STEPS;
        db->pending = xrealloc(db->pending, (size_t)db->cap_pending * sizeof *db->pending);
    }
    if (db->n_pending_stages + n_stages > db->cap_pending_stages) {
        while (db->n_pending_stages + n_stages > db->cap_pending_stages)
            db->cap_pending_stages = db->cap_pending_stages ? 2 * db->cap_pending_stages : 8 * DB_FLUSH_STEPS;
        db->pending_stages = xrealloc(db->pending_stages, (size_t)db->cap_pending_stages * sizeof *db->pending_stages);
    }
    db->pending[db->n_pending++] = (DbPendingStep){run, *step, db->n_pending_stages, n_stages};
    if (n_stages) memcpy(db->pending_stages + db->n_pending_stages, stages, (size_t)n_stages * sizeof *stages);
    db->n_pending_stages += n_stages;
    const double now = monotonic_ms();
    if (now < db->retry_at_ms) return 0;   // the lock was held at the last try: wait out the pause
    if (db->n_pending >= DB_FLUSH_STEPS || now - db->last_commit_ms >= DB_FLUSH_MS) return db_flush(db, err);
    return 0;
}

int db_eval_add(Db *db, int64_t run, const DbEval *eval, Error *err) {
    assert(db->writer);
    if (db->n_pending_evals == db->cap_pending_evals) {
        db->cap_pending_evals = db->cap_pending_evals ? 2 * db->cap_pending_evals : 16;
        db->pending_evals = xrealloc(db->pending_evals, (size_t)db->cap_pending_evals * sizeof *db->pending_evals);
    }
    db->pending_evals[db->n_pending_evals++] = (DbPendingEval){run, *eval};
    // Rare (a pass every --val-every steps) and worth seeing at once in `watch`: committed now,
    // with the steps before it, unless the store was locked at the last try.
    if (monotonic_ms() < db->retry_at_ms) return 0;
    return db_flush(db, err);
}

int db_sample_add(Db *db, int64_t run, const DbSample *sample, Error *err) {
    assert(db->writer);
    if (db->n_pending_samples == db->cap_pending_samples) {
        db->cap_pending_samples = db->cap_pending_samples ? 2 * db->cap_pending_samples : 8;
        db->pending_samples =
            xrealloc(db->pending_samples, (size_t)db->cap_pending_samples * sizeof *db->pending_samples);
    }
    DbPendingSample *p = &db->pending_samples[db->n_pending_samples++];
    *p = (DbPendingSample){run, *sample};
    p->sample.text = strcpy(xmalloc(strlen(sample->text) + 1), sample->text);
    // As rare as a validation pass, and as worth seeing at once: committed now (db_eval_add).
    if (monotonic_ms() < db->retry_at_ms) return 0;
    return db_flush(db, err);
}

bool db_busy(const Db *db) {
    return db->last_failure == SQLITE_BUSY || db->last_failure == SQLITE_LOCKED;
}

bool db_backlogged(const Db *db) {
    return db->retry_at_ms > 0;
}

void db_set_patience(Db *db, int ms) {
    sqlite3_busy_timeout(db->sql, ms > db->busy_timeout_ms ? ms : db->busy_timeout_ms);
}

int db_busy_timeout_ms(const Db *db) {
    return db->busy_timeout_ms;
}

int db_discard_pending(Db *db) {
    const int n = db->n_pending + db->n_pending_evals + db->n_pending_samples;
    db->n_pending = db->n_pending_stages = db->n_pending_evals = 0;
    clear_pending_samples(db);
    return n;
}

static int db_insert_step(Db *db, const DbPendingStep *p, Error *err) {
    static const char SQL[] =
        "INSERT INTO steps (run_id, step, loss, lr, grad_norm, tokens_per_s, step_ms, gflops, bubble, bubble_ideal, "
        "bubble_imbalance, bubble_transfer, bubble_contention) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    const DbStep *s = &p->step;
    int b = sqlite3_bind_int64(stmt, 1, p->run) | sqlite3_bind_int(stmt, 2, s->step);
    const double reals[] = {s->loss, s->lr, s->grad_norm, s->tokens_per_s, s->step_ms, s->gflops, s->bubble,
                            s->bubble_ideal, s->bubble_imbalance, s->bubble_transfer, s->bubble_contention};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) b |= bind_real(stmt, 3 + (int)i, reals[i]);
    return db_step_done(db, stmt, b, "recording a step", err);
}

static int db_insert_stage_step(Db *db, int64_t run, int step, const DbStageStep *s, Error *err) {
    static const char SQL[] =
        "INSERT INTO stage_steps (run_id, step, stage, rank, busy_ms, between_ms, sendrecv_ms, peak_act_bytes, transfer_ms, "
        "wait_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int b = sqlite3_bind_int64(stmt, 1, run) | sqlite3_bind_int(stmt, 2, step) | sqlite3_bind_int(stmt, 3, s->stage) |
            sqlite3_bind_int(stmt, 4, s->rank) | bind_real(stmt, 5, s->busy_ms) | bind_real(stmt, 6, s->between_ms) |
            bind_real(stmt, 7, s->sendrecv_ms) | sqlite3_bind_int64(stmt, 8, s->peak_act_bytes) |
            bind_real(stmt, 9, s->transfer_ms) | bind_real(stmt, 10, s->wait_ms);
    return db_step_done(db, stmt, b, "recording a stage step", err);
}

static int db_insert_eval(Db *db, const DbPendingEval *p, Error *err) {
    static const char SQL[] = "INSERT INTO evals (run_id, step, val_loss, batches) VALUES (?, ?, ?, ?)";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int b = sqlite3_bind_int64(stmt, 1, p->run) | sqlite3_bind_int(stmt, 2, p->eval.step) |
            bind_real(stmt, 3, p->eval.val_loss) | sqlite3_bind_int(stmt, 4, p->eval.batches);
    return db_step_done(db, stmt, b, "recording a validation loss", err);
}

static int db_insert_sample(Db *db, const DbPendingSample *p, Error *err) {
    static const char SQL[] = "INSERT INTO samples (run_id, step, tokens, seconds, text) VALUES (?, ?, ?, ?, ?)";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    const DbSample *s = &p->sample;
    int b = sqlite3_bind_int64(stmt, 1, p->run) | sqlite3_bind_int(stmt, 2, s->step) |
            sqlite3_bind_int(stmt, 3, s->tokens) | bind_real(stmt, 4, s->seconds) |
            sqlite3_bind_blob(stmt, 5, s->text, (int)strlen(s->text), SQLITE_TRANSIENT);
    return db_step_done(db, stmt, b, "recording a sample", err);
}

static int db_heartbeat(Db *db, int64_t run, const char *now, Error *err) {
    static const char SQL[] = "UPDATE runs SET heartbeat_at = ? WHERE id = ?";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int b = bind_text(stmt, 1, now) | sqlite3_bind_int64(stmt, 2, run);
    return db_step_done(db, stmt, b, "recording a heartbeat", err);
}

static int db_insert_pending(Db *db, Error *err) {
    char now[32];
    now_iso(now);
    for (int i = 0; i < db->n_pending; i++) {
        const DbPendingStep *p = &db->pending[i];
        if (db_insert_step(db, p, err)) return -1;
        for (int k = 0; k < p->n_stages; k++)
            if (db_insert_stage_step(db, p->run, p->step.step, &db->pending_stages[p->stage0 + k], err)) return -1;
        bool last_of_run = i + 1 == db->n_pending || db->pending[i + 1].run != p->run;
        if (last_of_run && db_heartbeat(db, p->run, now, err)) return -1;
    }
    for (int i = 0; i < db->n_pending_evals; i++)
        if (db_insert_eval(db, &db->pending_evals[i], err)) return -1;
    for (int i = 0; i < db->n_pending_samples; i++)
        if (db_insert_sample(db, &db->pending_samples[i], err)) return -1;
    return 0;
}

// A busy commit sets a pause before db_step_add tries again (1 s, doubling up to
// DB_RETRY_MAX_MS), so that a lock held for minutes costs the run one busy wait per pause, not
// one per step. The rows stay buffered meanwhile.
static int db_flush_failed(Db *db) {
    db_rollback(db);
    if (db_busy(db)) {
        db->retry_pause_ms = db->retry_pause_ms > 0 ? 2 * db->retry_pause_ms : DB_FLUSH_MS;
        if (db->retry_pause_ms > DB_RETRY_MAX_MS) db->retry_pause_ms = DB_RETRY_MAX_MS;
        db->retry_at_ms = monotonic_ms() + db->retry_pause_ms;
    }
    return -1;
}

// SQLite writes on through an open descriptor after the file is unlinked, so a store deleted
// (or replaced by another file) mid-run would take every later row into a file nobody can
// open, and the run would end in silence with its history gone. The path must still name the
// file the writer opened.
static int db_check_still_there(Db *db, Error *err) {
    struct stat held, now;
    if (db->held_fd < 0) return 0;
    const bool unlinked = fstat(db->held_fd, &held) == 0 && held.st_nlink == 0;
    const bool same = stat(db->path, &now) == 0 && now.st_dev == db->dev && now.st_ino == db->ino;
    if (!unlinked && same) return 0;
    error_set(err, "%s: the run store was %s while this run wrote it; its rows from here on cannot be recorded",
              db->path, unlinked && stat(db->path, &now) != 0 ? "deleted" : "replaced by another file");
    db->last_failure = SQLITE_NOTFOUND;   // not busy: recording ends, and the run stops
    return -1;
}

int db_flush(Db *db, Error *err) {
    if (db->n_pending == 0 && db->n_pending_evals == 0 && db->n_pending_samples == 0) return 0;
    if (db_check_still_there(db, err)) return -1;
    if (db_exec(db, "BEGIN IMMEDIATE", "recording steps", err)) return db_flush_failed(db);
    if (db_insert_pending(db, err) || db_exec(db, "COMMIT", "committing steps", err)) return db_flush_failed(db);
    db->n_pending = db->n_pending_stages = db->n_pending_evals = 0;
    clear_pending_samples(db);
    db->last_commit_ms = monotonic_ms();
    db->retry_at_ms = db->retry_pause_ms = 0;
    return 0;
}

// ---- checkpoints ------------------------------------------------------------------------------

// base/path, or path itself when it is absolute (malloc'd).
static char *path_against(const char *base, const char *path) {
    const size_t n = strlen(base) + strlen(path) + 2;
    char *out = xmalloc(n);
    if (path[0] == '/') snprintf(out, n, "%s", path);
    else snprintf(out, n, "%s/%s", base, path);
    return out;
}

char *db_checkpoint_dir(const Db *db, const char *dir) {
    if (!dir) return NULL;
    char store[PATH_MAX], *base = store;
    if (dir[0] == '/' || !realpath(db->path, store)) return path_against(".", dir);
    *strrchr(store, '/') = '\0';   // realpath's answer is absolute: it has a '/'
    if (!store[0]) base = "/";
    return path_against(base, dir);
}

int64_t db_checkpoint_begin(Db *db, int64_t run, int step, const char *dir, Error *err) {
    assert(db->writer);
    if (db_flush(db, err)) return -1;
    static const char SQL[] =
        "INSERT INTO checkpoints (run_id, step, dir, created_at, status) VALUES (?, ?, ?, ?, 'writing')";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    char now[32];
    now_iso(now);
    char cwd[PATH_MAX];
    char *absolute = path_against(dir[0] == '/' || !getcwd(cwd, sizeof cwd) ? "." : cwd, dir);
    int b = sqlite3_bind_int64(stmt, 1, run) | sqlite3_bind_int(stmt, 2, step) | bind_text(stmt, 3, absolute) |
            bind_text(stmt, 4, now);
    free(absolute);
    if (db_step_done(db, stmt, b, "recording a checkpoint", err)) return -1;
    return sqlite3_last_insert_rowid(db->sql);
}

int db_write_begin(Db *db, Error *err) { return db_exec(db, "BEGIN IMMEDIATE", "starting a write", err); }
int db_write_commit(Db *db, Error *err) { return db_exec(db, "COMMIT", "committing a write", err); }
void db_write_rollback(Db *db) { db_rollback(db); }

int64_t db_checkpoint_find(Db *db, int64_t run, const char *dir, bool *complete, Error *err) {
    static const char SQL[] = "SELECT id, status FROM checkpoints WHERE run_id = ? AND dir = ? ORDER BY id DESC LIMIT 1";
    *complete = false;
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int64_t id = 0;
    const int b = sqlite3_bind_int64(stmt, 1, run) | bind_text(stmt, 2, dir);
    const int rc = b == SQLITE_OK ? sqlite3_step(stmt) : b;
    if (rc == SQLITE_ROW) {
        id = sqlite3_column_int64(stmt, 0);
        const char *status = (const char *)sqlite3_column_text(stmt, 1);
        *complete = status && strcmp(status, "complete") == 0;
    }
    sqlite3_reset(stmt);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        db_fail(db, err, "finding a checkpoint");
        return -1;
    }
    return id;
}

int db_checkpoint_files_clear(Db *db, int64_t checkpoint, Error *err) {
    sqlite3_stmt *stmt = db_stmt(db, "DELETE FROM checkpoint_files WHERE checkpoint_id = ?", err);
    if (!stmt) return -1;
    return db_step_done(db, stmt, sqlite3_bind_int64(stmt, 1, checkpoint), "clearing a checkpoint's files", err);
}

static bool is_sha256_hex(const char *s) {
    if (!s || strlen(s) != 64) return false;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) return false;
    return true;
}

int db_checkpoint_file_add(Db *db, int64_t checkpoint, const char *path, int64_t bytes, const char *sha256,
                           int stage, Error *err) {
    assert(db->writer);
    if (!is_sha256_hex(sha256)) {
        error_set(err, "%s: checkpoint file %s: sha256 '%s' is not 64 lowercase hex digits", db->path, path,
                  sha256 ? sha256 : "(null)");
        return -1;
    }
    static const char SQL[] =
        "INSERT INTO checkpoint_files (checkpoint_id, path, bytes, sha256, stage) VALUES (?, ?, ?, ?, ?)";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int b = sqlite3_bind_int64(stmt, 1, checkpoint) | bind_text(stmt, 2, path) | sqlite3_bind_int64(stmt, 3, bytes) |
            bind_text(stmt, 4, sha256) | (stage >= 0 ? sqlite3_bind_int(stmt, 5, stage) : SQLITE_OK);
    return db_step_done(db, stmt, b, "recording a checkpoint file", err);
}

// Moves a 'writing' checkpoint to 'complete' (bytes = the sum of its files) or 'failed'.
static int db_checkpoint_finish(Db *db, int64_t checkpoint, bool complete, const char *error, Error *err) {
    assert(db->writer);
    static const char SQL[] =
        "UPDATE checkpoints SET status = ?1, error = ?2, completed_at = ?3, "
        "bytes = (SELECT coalesce(sum(bytes), 0) FROM checkpoint_files WHERE checkpoint_id = ?4) "
        "WHERE id = ?4 AND status = 'writing'";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    char now[32];
    now_iso(now);
    int b = bind_text(stmt, 1, complete ? "complete" : "failed") | bind_text(stmt, 2, error) |
            bind_text(stmt, 3, now) | sqlite3_bind_int64(stmt, 4, checkpoint);
    if (db_step_done(db, stmt, b, "finishing a checkpoint", err)) return -1;
    if (sqlite3_changes(db->sql) != 1) {
        error_set(err, "%s: checkpoint %lld is not being written", db->path, (long long)checkpoint);
        return -1;
    }
    return 0;
}

int db_checkpoint_complete(Db *db, int64_t checkpoint, Error *err) {
    return db_checkpoint_finish(db, checkpoint, true, NULL, err);
}

int db_checkpoint_fail(Db *db, int64_t checkpoint, const char *error, Error *err) {
    return db_checkpoint_finish(db, checkpoint, false, error, err);
}
