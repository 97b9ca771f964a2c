// storage/db: the run store, one SQLite file (default pptrain.db). Rank 0 writes runs, steps,
// per-stage timings and checkpoint manifests; `pptrain history` and `pptrain watch` read them
// while a run is writing (WAL: readers never wait for the writer). The schema is documented at
// the top of storage/db.c and printed by `pptrain history schema`.
//
// Every function that can fail fills Error with one line ("FILE: what: sqlite's message") and
// returns -1 (or NULL); a Db stays usable after a failed call.
#ifndef PPTRAIN_DB_H
#define PPTRAIN_DB_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/error.h"

#define DB_DEFAULT_PATH "pptrain.db"
#define DB_SCHEMA_VERSION 6          // PRAGMA user_version this build writes and reads
#define DB_APPLICATION_ID 0x70707472 // PRAGMA application_id: "pptr"
#define DB_FLUSH_STEPS 50            // db_step_add commits after this many buffered steps...
#define DB_FLUSH_MS 1000             // ...or when this long has passed since the last commit

typedef struct Db Db;

// create = true (the writer, rank 0): opens or creates FILE and migrates it to this build's
// schema. create = false (readers): FILE must exist; it is opened read-only (a store written by
// an older pptrain is first migrated in place). Refused with one line, the file untouched: a
// file that is not SQLite, a SQLite database that is not a pptrain store, a store whose schema
// is newer than this build, a store that fails PRAGMA quick_check (a damaged page).
Db *db_open(const char *path, bool create, Error *err);
// Flushes buffered steps (a failure is reported on stderr: there is no caller left to tell).
void db_close(Db *db);
const char *db_path(const Db *db);
// The whole schema as SQL that the sqlite3 shell can run to create an empty store.
void db_schema_write(FILE *out);

// ---- writing (rank 0) --------------------------------------------------------------------
typedef struct {
    const char *schedule;       // "1f1b", ..., or the CSV's path
    int stages, virtual_stages, dp, microbatches;  // P, V, D, M
    int batch, seq_len;         // B, T
    const char *model;          // preset name or config path
    int64_t params;
    double lr;                  // peak learning rate
    uint64_t seed;
    const char *transport;      // local | mpi | nccl
    const char *device;         // cpu | cuda
    int64_t resumed_from;       // the run this one resumes; 0: none
    const char *config_json;    // the full run configuration as a JSON object; NULL: none
    int steps_planned;
    int host_cores;             // CPU cores the writing process may use; 0: unknown
    int host_ranks;             // the run's rank threads or processes on that host; 0: unknown
} DbRun;

typedef struct {
    int step;                   // 1-based
    double loss, lr, grad_norm;
    double tokens_per_s, step_ms, gflops;
    double bubble;              // measured idle fraction of the step in [0, 1]; NaN: not measured
    // The bubble's parts (engine/telemetry.h BubbleParts), adding up to it; NaN: not measured.
    double bubble_ideal, bubble_imbalance, bubble_transfer, bubble_contention;
} DbStep;                       // NaN in any field is stored as NULL

typedef struct {
    int stage, rank;
    double busy_ms;             // computing (F, B, I, W)
    double between_ms;          // its rank's time outside every action
    double sendrecv_ms;         // inside this stage's sends and receives (a blocked receive's wait too)
    int64_t peak_act_bytes;
    double transfer_ms;         // of sendrecv_ms, moving this stage's messages
    double wait_ms;             // its rank's non-busy time beyond transfer: waiting for a peer
} DbStageStep;

typedef struct {
    int step;                   // optimizer steps done when the pass ran
    double val_loss;            // NaN: stored as NULL
    int batches;                // held-out batches evaluated
} DbEval;

typedef struct {
    int step;                   // optimizer steps done when the sample was taken
    int tokens;                 // new tokens
    double seconds;             // the time it took (never part of a step's time)
    char *text;                 // (malloc'd, NUL-terminated) the decoded bytes, as the model wrote them
} DbSample;

// Inserts a run with status 'running', this host and process id. Returns its id, or -1.
int64_t db_run_begin(Db *db, const DbRun *run, Error *err);
// Buffers one step and its n_stages stage rows (copied); commits the buffer in one transaction
// every DB_FLUSH_STEPS steps or DB_FLUSH_MS, whichever comes first. On a failed commit the
// rows stay buffered and a later call retries them (after a busy one: no sooner than 1 s,
// the pause doubling up to 30 s while the lock stays held).
int db_step_add(Db *db, int64_t run, const DbStep *step, const DbStageStep *stages, int n_stages, Error *err);
// Buffers one validation pass and commits it with the buffered steps right away (unless a
// locked store set a pause: then with the next commit).
int db_eval_add(Db *db, int64_t run, const DbEval *eval, Error *err);
// The same for a sample of the model (train --sample-every); its text is copied.
int db_sample_add(Db *db, int64_t run, const DbSample *sample, Error *err);
int db_flush(Db *db, Error *err);
// After a failed write: true when it failed only because another connection held the write
// lock past the busy wait (SQLITE_BUSY), so the same write may succeed later; false for a
// store that cannot be written (full disk, I/O error, read-only, damaged).
bool db_busy(const Db *db);
// Steps are buffered because the latest commit found the store locked (until one succeeds).
bool db_backlogged(const Db *db);
// The lock wait of the writes that follow: at least the ordinary one (5 s; a test may shorten
// it with PPTRAIN_TEST_DB_BUSY_MS). Checkpoints and a run's end wait longer: they must land.
void db_set_patience(Db *db, int ms);
int db_busy_timeout_ms(const Db *db);
// Drops the buffered steps and validation passes that could not be committed; returns how many. For a run that ends
// failed because the store cannot take them: its row can then still say so.
int db_discard_pending(Db *db);
// Flushes, then sets status ('finished', 'failed' or 'stopped'), ended_at and error.
int db_run_end(Db *db, int64_t run, const char *status, const char *error_or_null, Error *err);
// The same, with the end's time given (ISO-8601 UTC; NULL: now): a journal's replay.
int db_run_end_at(Db *db, int64_t run, const char *status, const char *error_or_null, const char *ended_at,
                  Error *err);
// A run whose process died (SIGKILL, power loss) stays 'running'. This marks every 'running'
// run recorded by a process on this host that no longer exists as 'failed' ("process N on
// HOST ended without finishing the run"), ended at its last commit. The writer calls it after
// db_open; readers show such runs as "crashed" without changing them. Sets *n_marked.
int db_mark_stale_runs(Db *db, int *n_marked, Error *err);

// Checkpoint manifests: begin ('writing'), one row per durable file, then complete or fail.
// db_checkpoint_begin flushes the steps first, so a complete checkpoint never lies ahead of the
// recorded losses. complete only flips the status (and sums the bytes): the caller has already
// made every file durable.
// A relative dir is stored made absolute against the working directory, so --resume and
// export find the checkpoint from any folder.
int64_t db_checkpoint_begin(Db *db, int64_t run, int step, const char *dir, Error *err);
// A checkpoint row's dir as a path that opens from anywhere (malloc'd; NULL stays NULL). Rows
// of stores written before dirs were stored absolute hold them relative to the run's working
// directory, which was the store's folder when the store was the default ./pptrain.db: they
// are resolved against the store's folder.
char *db_checkpoint_dir(const Db *db, const char *dir);
// path relative to the checkpoint dir; sha256 as 64 lowercase hex digits; stage < 0: not a
// stage's shard (index, config, trainer state).
int db_checkpoint_file_add(Db *db, int64_t checkpoint, const char *path, int64_t bytes, const char *sha256,
                           int stage, Error *err);
int db_checkpoint_complete(Db *db, int64_t checkpoint, Error *err);
// The newest checkpoint row of run with exactly this dir (0: none; -1 on error), and whether
// it is complete; and the removal of a row's file list, for db_journal's replay.
int64_t db_checkpoint_find(Db *db, int64_t run, const char *dir, bool *complete, Error *err);
// One write transaction around several of the calls above (BEGIN IMMEDIATE: the lock is taken
// first, so two processes never interleave them).
int db_write_begin(Db *db, Error *err);
int db_write_commit(Db *db, Error *err);
void db_write_rollback(Db *db);
int db_checkpoint_files_clear(Db *db, int64_t checkpoint, Error *err);
int db_checkpoint_fail(Db *db, int64_t checkpoint, const char *error, Error *err);

// ---- reading (storage/db_query.c) --------------------------------------------------------
typedef struct {
    int64_t id;
    char *started_at, *ended_at;      // ISO-8601 UTC; ended_at NULL while running
    char *status;
    bool crashed;                     // 'running', but its process on this host is gone
    char *error;
    char *schedule, *model, *transport, *device, *config_json, *host;
    int stages, virtual_stages, dp, microbatches, batch, seq_len, steps_planned;
    int64_t params, resumed_from, pid;
    double lr;
    uint64_t seed;
    int host_cores, host_ranks;       // 0: unknown (a store older than version 3)
    // From the steps (NaN when there are none).
    int steps_done;                   // rows in steps
    int last_step;
    double last_loss, min_loss, median_tokens_per_s, mean_bubble;   // median: first step left out (of 2+)
    double mean_ideal, mean_imbalance, mean_transfer, mean_contention;   // the bubble's parts
    // From the evals (NaN, 0 when there are none).
    int evals, last_val_step;
    double last_val_loss, min_val_loss;
} DbRunInfo;

typedef struct {
    const char *schedule, *status;    // NULL: any
    const char *since;                // ISO-8601 UTC; runs started at or after it; NULL: any
    int limit;                        // 0: all
} DbRunFilter;

typedef struct {
    int stage, ranks, steps;          // ranks: distinct ranks that reported this stage
    double busy_ms, between_ms, sendrecv_ms; // means over steps and ranks
    double transfer_ms, wait_ms;      // means; NaN before version 3
    double busy_frac;                 // busy / (busy + between + sendrecv)
    int64_t peak_act_bytes;           // the largest reported
} DbStageSummary;

typedef struct {
    int64_t id;
    int step, files;
    char *dir, *created_at, *status, *error;
    int64_t bytes;
} DbCheckpointInfo;

// Newest first. *out is an array of *n runs; free with db_runs_free.
int db_runs_list(Db *db, const DbRunFilter *filter, DbRunInfo **out, int *n, Error *err);
// 0 and *out filled; -1 with "FILE: no run N" when there is none.
int db_run_get(Db *db, int64_t id, DbRunInfo *out, Error *err);
void db_run_info_clear(DbRunInfo *info);
void db_runs_free(DbRunInfo *runs, int n);
// The id of the newest run; 0 when the store is empty; -1 on error.
int64_t db_run_latest(Db *db, Error *err);
// The run's steps in step order; last_n > 0: only the last last_n. free() *out.
int db_steps_read(Db *db, int64_t run, int last_n, DbStep **out, int *n, Error *err);
// The run's validation passes in step order. free() *out.
int db_evals_read(Db *db, int64_t run, DbEval **out, int *n, Error *err);
// A run's samples in step order (*out malloc'd, each text too: db_samples_free).
int db_samples_read(Db *db, int64_t run, DbSample **out, int *n, Error *err);
void db_samples_free(DbSample *s, int n);
// One row per stage, in stage order. free() *out.
int db_stage_summary(Db *db, int64_t run, DbStageSummary **out, int *n, Error *err);
// In step order; free with db_checkpoints_free.
int db_checkpoints_read(Db *db, int64_t run, DbCheckpointInfo **out, int *n, Error *err);
void db_checkpoints_free(DbCheckpointInfo *cks, int n);
typedef struct {
    char path[256];                   // relative to the checkpoint's dir
    int64_t bytes;
    char sha256[65];
    int stage;                        // -1: not a stage's shard
} DbCheckpointFile;
// A checkpoint's manifest in path order. free() *out.
int db_checkpoint_files_read(Db *db, int64_t checkpoint, DbCheckpointFile **out, int *n, Error *err);

// ---- shared by storage/db*.c only ----------------------------------------------------------
struct sqlite3_stmt;
// The statement for sql (a string with static storage: the cache is keyed by its address),
// prepared on first use and reset for reuse; NULL with err set on failure.
struct sqlite3_stmt *db_stmt(Db *db, const char *sql, Error *err);
// Fills err with "FILE: what: sqlite's message" and returns -1.
int db_fail(Db *db, Error *err, const char *what);
// A read transaction (one consistent snapshot) around several queries; nests.
int db_read_begin(Db *db, Error *err);
void db_read_end(Db *db);
// The writer's statements (db.c) for its files beside it (db_stale_runs.c).
bool db_is_writer(const Db *db);
// sql run at once; -1 with err ("FILE: what: sqlite's message").
int db_exec(Db *db, const char *sql, const char *what, Error *err);
// Runs a statement that returns no rows and resets it. bound: its sqlite3_bind_* results
// OR-ed together (SQLITE_OK is 0), so that a failed bind fails the statement.
int db_step_done(Db *db, struct sqlite3_stmt *stmt, int bound, const char *what, Error *err);
int db_rollback(Db *db);
#endif
