// Records a training run in the run store (storage/db): wired to the trainer's hooks by the
// console floor, since the engine never includes storage. Only rank 0 records.
#ifndef PPTRAIN_RUN_RECORDER_H
#define PPTRAIN_RUN_RECORDER_H
#include <stdint.h>

#include "engine/train_loop.h"
#include "storage/db.h"

typedef struct {
    char path[4096];        // the store's file ("" = do not record)
    Db *db;
    int64_t run;            // 0 until the run row exists
    // A write that found the store locked keeps its rows buffered and is retried (busy: warned
    // once per episode). A write that failed otherwise (full disk, I/O error) fails the
    // recorder: it records nothing more, and the session stops the run after a final
    // checkpoint, ending it failed with `failure` as its line.
    bool busy;              // the latest write found the store locked
    bool write_failed;
    Error failure;          // why write_failed
    bool locked_out;        // write_failed, or the run's end unrecorded, because the store stayed
                            // locked past the patience: the session keeps it in a journal
    const size_t *slot_bytes;   // (stages) activation bytes of one microbatch, from RunInfo
    int64_t resumed_from;       // the run this one continues (0: a fresh run)
} RunRecorder;

// Opens (creating or migrating) the store and inserts the run as 'running'.
int recorder_begin(RunRecorder *r, const RunConfig *rc, const PipelineOptions *po, const RunInfo *info,
                   Error *err);
// Buffers one step with its per-stage rows (the store commits in batches).
void recorder_step(RunRecorder *r, const PipelineReport *pr);
// Records one validation pass (committed at once unless the store is locked).
void recorder_eval(RunRecorder *r, int step, double val_loss, int batches);
// A sample of the model (train --sample-every), its text as the model wrote it.
void recorder_sample(RunRecorder *r, int step, int tokens, const char *text, double seconds);
// status: finished | failed | stopped; error: the failure's line or NULL. Waits for a locked
// store (RECORDER_PATIENCE_WAITS); a failed recorder drops its unwritten steps so that the row can
// still say 'failed'. Closes the store. Returns -1 with err when the end could not be recorded.
int recorder_end(RunRecorder *r, const char *status, const char *error, Error *err);
// Checkpoint rows must land: these wait for a locked store (RECORDER_PATIENCE_WAITS) and fail the
// recorder when the store cannot take them. 0 / the checkpoint's id, or -1 when not recorded.
int64_t recorder_checkpoint_begin(RunRecorder *r, int step, const char *dir);
int recorder_checkpoint_file(RunRecorder *r, int64_t id, const char *path, int64_t bytes, const char *sha256,
                             int stage);
int recorder_checkpoint_complete(RunRecorder *r, int64_t id);
void recorder_checkpoint_fail(RunRecorder *r, int64_t id, const char *why);

// A locked store is waited for this long by the writes that must not be lost (run start and
// end, checkpoints): 12 ordinary busy waits, 60 s by default.
#define RECORDER_PATIENCE_WAITS 12
#endif
